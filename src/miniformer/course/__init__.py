"""The course notebook's side of the package, one concern per module.

  checks.py   a student's function against a plain textbook computation, with reasons in Chinese and English
  answers.py  the notebook's answers, switched on for headless runs (the model never runs them)
  lab.py      training the mini-former on a student's code: the checks first, every function on the model's path,
              a diverging run said in one sentence, the student's breakages beside the reference study's numbers
"""

from miniformer.course.checks import CASES, check, solution

__all__ = ["CASES", "check", "solution"]
