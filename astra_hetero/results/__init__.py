"""One result type shared by every backend, its JSON form, and what is derived from it."""

from astra_hetero.results.model import CollectiveStat, RankResult, RunOutput, RunResult, Span

__all__ = ["CollectiveStat", "RankResult", "RunOutput", "RunResult", "Span"]
