"""The GitHub App webhook: verified, routed and stored.

- webhooks: the HMAC check and the body read (`webhook_read`); payload_shape: what each event
  must hold;
- deliveries: routing and storing a delivery, then its dispatch (`webhook_intake`);
- commits: the upstream commits and pull requests a delivery names."""
