"""Talking to GitHub as the App.

- client: the App client (JWT, installation tokens, calls); installations: the one
  `installation_id_for`, and the installed set kept in sync; repo_ids: a repository's immutable id;
- upstream: questions about the upstream repository; ratelimit: the write budget per installation;
- writes: an upstream write intended (`write_enqueue`, `write_unsent`, `Plan`, `Skip`), sent by relay.checks.outbox;
  markdown: what any upstream body may hold (`md_code`, `md_link`, `upstream_body`);
- tasks: the installations' hourly sync."""
