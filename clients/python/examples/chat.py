"""Chat with Memoria and print the answer as it streams: python chat.py "your message"."""

import asyncio
import os
import sys

from memoria_client import AsyncMemoria, CycleEndFrame, DeltaFrame, Message


async def main(text: str) -> None:
    async with AsyncMemoria() as memoria:
        if not memoria.token:
            await memoria.login(os.environ.get("MEMORIA_USER", "demo"))
        streamed: set[str] = set()
        async for frame in memoria.chat(text, thread="main"):
            if isinstance(frame, DeltaFrame):
                streamed.add(frame.id)
                print(frame.content, end="", flush=True)
            elif isinstance(frame, Message) and frame.role != "user":
                if frame.modal == "memory":
                    print(f"[memory] {frame.content.get('content')}")
                elif frame.modal == "text":
                    print("" if frame.id in streamed else frame.content)
            elif isinstance(frame, CycleEndFrame):
                print(f"-- {' → '.join(frame.actions)} ({frame.reason})")


asyncio.run(main(" ".join(sys.argv[1:]) or "What do you remember about me?"))
