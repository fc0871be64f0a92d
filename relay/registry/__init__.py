"""The registry: which downstream projects the relay serves, at which level, with which CI.

- service: every write to the registry, audited with who and why (`project_register`,
  `project_set_level`, `project_update`, `allowlist_import`/`_export`, `providers_import`/`_export`);
- allowlist: upstream's allowlist.yml, read and written in its own shape (`parse_allowlist`,
  `oncall_list`, `AllowlistError`);
- providers: config/ci_providers.yml, the CI providers' identities (`parse_providers`,
  `render_providers`, `ProvidersError`).

The demotion loop's in-place edit of upstream's file is relay.levels.allowlist_moves."""
