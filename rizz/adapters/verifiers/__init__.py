"""Verifiers: the benchmarks' real metrics, answer extraction by output shape, and the sandbox
that runs model-written code (§1, §6).

Examples:
  >>> verify("exact_match", "Answer: B", "B", shape="letter").reward
  1.0
  >>> extract_answer("In 2019 there were 3 ... The answer is 42", "number").answer
  '42'
"""

from rizz.adapters.verifiers.extract import SHAPES, Extraction, extract_answer
from rizz.adapters.verifiers.metrics import VERIFIER_NAMES, VerifierResult, correction_of, verify
from rizz.adapters.verifiers.sandbox import Isolation, SandboxResult, isolation, run_untrusted

__all__ = [
    "SHAPES",
    "VERIFIER_NAMES",
    "Extraction",
    "Isolation",
    "correction_of",
    "SandboxResult",
    "VerifierResult",
    "extract_answer",
    "isolation",
    "run_untrusted",
    "verify",
]
