"""Fixed-edge histograms of queue, execution and end-to-end seconds: mergeable across buckets,
with quantiles interpolated within a bin."""

from dataclasses import dataclass, field

# --- histograms -------------------------------------------------------------------------------------

EDGES = (
    10,
    20,
    30,
    45,
    60,
    90,
    120,
    180,
    240,
    300,
    420,
    600,
    900,
    1200,
    1500,
    1800,
    2400,
    3000,
    3600,
    4500,
    5400,
    7200,
    9000,
    10800,
    14400,
    18000,
    21600,
    28800,
    43200,
    86400,
)
"""Bin upper edges in seconds (bin i holds [EDGES[i-1], EDGES[i]); the last bin is open). 30 min
and 3 h are edges so readiness verdicts at those thresholds are exact."""


def bin_case_sql(column: str) -> str:
    whens = " ".join(f"WHEN {column} < {edge} THEN {i}" for i, edge in enumerate(EDGES))
    return f"(CASE {whens} ELSE {len(EDGES)} END)"


@dataclass
class Histogram:
    counts: list = field(default_factory=lambda: [0] * (len(EDGES) + 1))
    total: float = 0.0

    @property
    def n(self) -> int:
        return sum(self.counts)

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def add(self, bin_index: int, count: int, total: float) -> None:
        self.counts[bin_index] += count
        self.total += total or 0.0

    def merge(self, other: "Histogram") -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.total += other.total

    def quantile(self, q: float) -> float | None:
        """Interpolated within the bin that holds the q-th value; the open last bin gives its edge."""
        n = self.n
        if not n:
            return None
        rank, seen = q * n, 0
        for i, count in enumerate(self.counts):
            if count and seen + count >= rank:
                low = EDGES[i - 1] if i else 0
                if i == len(EDGES):
                    return float(low)
                return low + (EDGES[i] - low) * max(0.0, rank - seen) / count
            seen += count
        return float(EDGES[-1])

    def share_at_least(self, seconds: int) -> float | None:
        """Fraction of values ≥ `seconds`; exact when `seconds` is one of EDGES."""
        n = self.n
        if not n:
            return None
        first_bin = EDGES.index(seconds) + 1
        return sum(self.counts[first_bin:]) / n
