"""Plan search (`astra-hetero plan`): which parallel plan and device mapping to run on a cluster.

Candidate generator (space, splits) + evaluator (the pipeline as a library, cached), searched by
branch and bound with the embedded simulator in the loop; see search.py for the steps.
"""

from astra_hetero.planner.driver import PLANNERS, PlanReport, find_plans
from astra_hetero.planner.problem import Problem, load_problem, problem_from_data

__all__ = ["PLANNERS", "PlanReport", "Problem", "find_plans", "load_problem", "problem_from_data"]
