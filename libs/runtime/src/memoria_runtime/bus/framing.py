"""Frame an envelope the way FastStream stores it in a stream entry.

Every writer uses it: the publishers (publisher.py) and the thread gate's Lua script, which
admits a message and appends it to ``chat.in`` in one step. The current trace context goes
into the headers, so the consumer's span joins the same trace; so does the signature every
consumer checks (signing.py). The signature names the stream, not its partition: a framed
entry is valid in whichever partition its user's work goes to.
"""

from __future__ import annotations

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_runtime.bus.service_bus import MESSAGE_FORMAT
from memoria_runtime.bus.signing import Signer
from memoria_runtime.telemetry import current_trace_carrier


async def frame_for_stream(signer: Signer, stream: Stream, event: Envelope) -> bytes:
    body = event.model_dump_json().encode()
    return await MESSAGE_FORMAT.encode(
        message=body,
        reply_to=None,
        headers={**current_trace_carrier(), **signer.headers(stream.value, body)},
        correlation_id=event.event_id,
    )
