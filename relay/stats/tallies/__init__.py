"""The tallies engine behind every summary page: the status policy in SQL (sql), histograms,
the tally per backend (tally), and cached time buckets (buckets)."""
