"""Facts the relay keeps, one module per concept, in the order the flow writes them:

- registry: downstream projects and their levels, the App's installations, the relay's own state;
- deliveries: webhook deliveries and the dispatches they fan out to (with each send attempt);
- results: job runs, failed tests, used callback tokens, re-run requests;
- upstream: the upstream repository's commits and pull requests;
- checks: what the relay writes back upstream (check runs, the oncall comment, the write outbox);
- demotion: the demotion loop's pull requests against the allowlist and its audit of decisions;
- triage: known issues and their occurrences, expectations;
- notify: subscriptions, notification events and the notifications sent for them;
- alerts: episodes of the relay's own health alerts;
- rollups: the level criteria's stored tallies per hour and day, and their refresh's watermark;
- bisection: bisections of a backend's new failure over upstream commits, and their probes;
- teststore: test identities, each backend's non-passing outcomes per commit and attempt, the
  commits the store took, flakiness states, mutes and their audit;
- enablement: each job's counts per upstream test module, the module → integration path rules.

Everything is re-exported here, so callers (and Django) say `from relay.models import X`."""

from relay.models.teststore import (
    HealthState,
    TestedCommit,
    TestHealth,
    TestIdentity,
    TestMute,
    TestMuteEvent,
    TestRun,
    identity_digest,
)

from .alerts import AlertEpisode
from .bisection import BISECT_EVENT, Bisection, BisectProbe
from .causes import CauseCommit, CauseHit, CauseIssue, CauseIssuePolicy, CauseRun, CauseTest, FailureCause
from .checks import OncallComment, UpstreamCheckRun, UpstreamWrite, UpstreamWriteAttempt
from .deliveries import PROBE_KEY_PREFIX, Delivery, Dispatch, DispatchAttempt, is_probe_key
from .demotion import DemotionDecision, DemotionPullRequest
from .enablement import CountedCommit, IntegrationPath, ModuleCount, PathRule
from .notify import Notification, NotificationAttempt, NotificationEvent, Subscription
from .registry import (
    VARIANT_KEYS,
    CIProvider,
    Event,
    HardwareKind,
    Installation,
    InstalledRepo,
    Level,
    LevelChange,
    PassRateBasis,
    Project,
    RelayState,
)
from .results import (
    FAILING_OUTCOMES,
    MAX_FAILED_TESTS,
    NEVER_STARTED_RUN_ID,
    SELF_REPORT_EVENTS,
    Conclusion,
    FailedTest,
    JobRun,
    RerunRequest,
    TestOutcome,
    UsedToken,
)
from .rollups import ExcusedRollup, RollupState, TallyRollup
from .triage import Expectation, IssueOccurrence, KnownIssue
from .upstream import PullRequest, UpstreamCommit

__all__ = [
    "CauseCommit",
    "CauseHit",
    "CauseIssue",
    "CauseIssuePolicy",
    "CountedCommit",
    "CauseRun",
    "CauseTest",
    "FailureCause",
    "AlertEpisode",
    "BISECT_EVENT",
    "Bisection",
    "BisectProbe",
    "PROBE_KEY_PREFIX",
    "is_probe_key",
    "ExcusedRollup",
    "RollupState",
    "TallyRollup",
    "SELF_REPORT_EVENTS",
    "NEVER_STARTED_RUN_ID",
    "CIProvider",
    "Conclusion",
    "Delivery",
    "DemotionDecision",
    "DemotionPullRequest",
    "Dispatch",
    "DispatchAttempt",
    "Event",
    "IntegrationPath",
    "ModuleCount",
    "PathRule",
    "FAILING_OUTCOMES",
    "MAX_FAILED_TESTS",
    "FailedTest",
    "TestOutcome",
    "HardwareKind",
    "Installation",
    "InstalledRepo",
    "JobRun",
    "Level",
    "PassRateBasis",
    "LevelChange",
    "OncallComment",
    "Project",
    "PullRequest",
    "RelayState",
    "VARIANT_KEYS",
    "RerunRequest",
    "UpstreamCheckRun",
    "UpstreamCommit",
    "UpstreamWrite",
    "UpstreamWriteAttempt",
    "UsedToken",
    "Expectation",
    "IssueOccurrence",
    "KnownIssue",
    "Notification",
    "NotificationAttempt",
    "NotificationEvent",
    "Subscription",
    "HealthState",
    "TestedCommit",
    "TestHealth",
    "TestIdentity",
    "TestMute",
    "TestMuteEvent",
    "TestRun",
    "identity_digest",
]
