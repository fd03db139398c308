"""Metrics record construction: from a request's outcome to telemetry's :class:`MetricsRecord`.

The :class:`~lsp_assist.backends.base.BackendUsage` and
:class:`~lsp_assist.telemetry.RequestTimes` fields are copied whole (both classes
compose the two); the rest says what the request was and how it ended. The prompt is
passed in by the caller for this request only, so a failed request never logs another
request's prompt.
"""

from __future__ import annotations

import time

from lsp_assist.context import AssembledPrompt
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.telemetry import MetricsRecord


def metrics_record(
    outcome: CompletionOutcome,
    query: CompletionQuery,
    *,
    language: str,
    trigger: str,
    prompt: AssembledPrompt | None,
    log_prompts: bool,
) -> MetricsRecord:
    """Return the metrics line of one request (its texts only with ``log_prompts``)."""
    record = MetricsRecord(
        ts=time.time(),
        request_id=outcome.request_id,
        task_type=query.task_type,
        language=language,
        strategy=outcome.strategy,
        trigger=trigger,
        cancelled=outcome.cancelled,
        cache_hit=outcome.cache_hit,
        error=outcome.error,
        confidence=None if outcome.confidence is None else round(outcome.confidence, 4),
    )
    outcome.copy_usage(record)
    outcome.copy_times(record)
    if log_prompts:
        record.completion = outcome.text
        if prompt is not None:
            # with token healing the model continued from the typed tail it was made to
            # write: the text it continued is the prompt plus that tail
            record.prompt = prompt.prompt + prompt.healed
    return record
