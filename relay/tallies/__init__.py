"""The tallies engine behind every summary page: the status policy in SQL (sql), histograms,
the tally per backend (tally), cached time buckets (buckets), the stored hourly rollups and their
minute refresh (rollups, tasks) and the hourly excused counts (excused). Above relay.results,
whose excused-jobs rule it stores; what counts comes from relay.stats."""
