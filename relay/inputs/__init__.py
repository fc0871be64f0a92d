"""How the relay reads what comes from outside: every byte, number, date, pattern and string that a
webhook, a callback, a query string or an admin hands it passes through one reader here.

- jsonin: JSON with its depth rule and no unstorable text (`loads`, `checked`, `NotStorable`), and
  written by orjson where it writes what json would (`encoded`);
- bodies: request bodies within their caps and deadlines (`body_within`, `body_drain`, `BodyTooSlow`);
- params: query-string numbers and dates (`int_param`, `int_list_param`, `aware_datetime`);
- linear: patterns that run in linear time, RE2 (`linear`, `is_linear`, `PatternError`);
- text: invisible and control characters made visible (`escaped`, `visible`, `plain_line`).

Pure: nothing here reads the database."""
