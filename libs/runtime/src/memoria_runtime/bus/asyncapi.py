"""A service's AsyncAPI 3.0 document, built from the channels its bus declares (channels.py)
and the envelope model every entry carries."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from memoria_contracts.events import Envelope
from memoria_runtime.bus.channels import Channel

_MESSAGE = "Envelope"
_SCHEMAS_REF = "#/components/schemas/{model}"


def asyncapi_document(
    *, title: str, version: str, description: str, redis_url: str, channels: list[Channel]
) -> dict[str, Any]:
    """The document as plain data (dump it as YAML or JSON). Each entry's ``__data__`` field
    holds the envelope framed in FastStream's binary format (bus/framing.py); the payload
    documented is the envelope."""
    url = urlsplit(redis_url)
    schema = Envelope.model_json_schema(ref_template=_SCHEMAS_REF)
    schemas: dict[str, Any] = schema.pop("$defs", {})
    schemas[_MESSAGE] = schema
    message_ref = {"$ref": f"#/components/messages/{_MESSAGE}"}
    documented_channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for channel in sorted(channels, key=lambda c: c.key):
        binding: dict[str, Any] = {"method": channel.operation, "channel": channel.stream}
        if channel.operation == "xreadgroup":
            binding["groupName"] = channel.role
        documented_channels[channel.key] = {
            "address": channel.stream,
            "description": channel.description,
            "messages": {_MESSAGE: dict(message_ref)},
            "bindings": {"redis": binding},
        }
        operations[channel.key] = {
            "action": "send" if channel.operation == "xadd" else "receive",
            "channel": {"$ref": f"#/channels/{channel.key}"},
            "messages": [{"$ref": f"#/channels/{channel.key}/messages/{_MESSAGE}"}],
        }
    return {
        "asyncapi": "3.0.0",
        "info": {"title": title, "version": version, "description": description},
        "defaultContentType": "application/json",
        "servers": {
            "development": {"host": url.netloc, "pathname": url.path or "/", "protocol": "redis"}
        },
        "channels": documented_channels,
        "operations": operations,
        "components": {
            "messages": {
                _MESSAGE: {
                    "title": _MESSAGE,
                    "payload": {"$ref": _SCHEMAS_REF.format(model=_MESSAGE)},
                    "correlationId": {"location": "$message.header#/correlation_id"},
                }
            },
            "schemas": schemas,
        },
    }
