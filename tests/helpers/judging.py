"""The workers' settings of a campaign file that gives no ``run:`` or ``compare:`` key, for tests that judge
variants without a campaign (the workers' ``JudgeSettings`` has no defaults of its own)."""
from __future__ import annotations

from gapfuzz.core.setting import defaults_of
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.run.messages import JudgeCompare, JudgeRun, JudgeSettings


def judge_settings(reference: str, oracle: str | None = None, **given) -> JudgeSettings:
    context = dict(reference=reference, oracle=oracle, compare=Tolerances(), ledger=None, probes=None,
                   device_references={})
    return JudgeSettings(**(defaults_of(JudgeRun) | defaults_of(JudgeCompare) | context | given))
