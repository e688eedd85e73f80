"""Studies: a study file → points (run through the sweep machinery, resumable) → results table →
report.md with its figures."""

from astra_hetero.studies.plan import Study, StudyPoint, load_study, plan_study
from astra_hetero.studies.report import ReportFiles, write_report
from astra_hetero.studies.run import StudyOutcome, run_study
from astra_hetero.studies.table import ResultsTable, build_table

__all__ = [
    "ReportFiles",
    "ResultsTable",
    "Study",
    "StudyOutcome",
    "StudyPoint",
    "build_table",
    "load_study",
    "plan_study",
    "run_study",
    "write_report",
]
