"""Model backends: embedded GGUF (offline default), Anthropic, OpenAI-compatible; response cache.

Backend modules import their heavy dependency (llama_cpp, anthropic, openai) only when a
backend is built (see :func:`~rizz.adapters.models.embedded.EmbeddedModel` and the others), so
importing this package is cheap.
"""

from rizz.adapters.models.anthropic_backend import AnthropicModel
from rizz.adapters.models.base import (
    ContextWindowExceeded,
    Generation,
    Message,
    ModelBackend,
    ModelConnectionError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    estimate_tokens,
    render_raw,
)
from rizz.adapters.models.cache import CachedModel, ResponseCache, cache_key
from rizz.adapters.models.embedded import EmbeddedModel
from rizz.adapters.models.openai_backend import OpenAICompatModel
from rizz.adapters.models.spec import SPEC_FORMS, load_model

__all__ = [
    "Message",
    "Generation",
    "ModelBackend",
    "ModelError",
    "ModelRequestError",
    "ModelConnectionError",
    "ModelUnavailableError",
    "ContextWindowExceeded",
    "load_model",
    "SPEC_FORMS",
    "ResponseCache",
    "CachedModel",
    "cache_key",
    "render_raw",
    "estimate_tokens",
    "EmbeddedModel",
    "AnthropicModel",
    "OpenAICompatModel",
]

