"""The test store's write side: identities and non-passing outcomes from the stored job rows
(`store`), the flakiness state machine (`machine`, pure) and its steps, the sweep that runs them."""
