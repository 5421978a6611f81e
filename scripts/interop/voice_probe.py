"""One voice question through a running museum-agent and the real servers behind it.

    <venv>/bin/python scripts/interop/voice_probe.py --url ws://127.0.0.1:PORT/ws/agent/stream \
        --key KEY --raw /usr/share/pocketsphinx/test/data/goforward.raw [--runs 3]

Sends the 16 kHz s16le recording as one BASE64 VOICE request with require_tts, prints the
transcript, the answer, the audio received (seconds of 16 kHz PCM) and the time from the end of
the upload to the transcript, first text and first audio byte, per run and the median.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import time

import websockets


def frame(msg_type: str, session_id: str, payload: dict) -> str:
    return json.dumps({"version": "1.0", "msg_type": msg_type, "session_id": session_id,
                       "payload": payload, "timestamp": int(time.time() * 1000)})


async def one(ws, session: str, pcm: bytes, rid: str) -> dict:
    await ws.send(frame("REQUEST", session, {
        "request_id": rid, "data_type": "VOICE", "stream_flag": False, "stream_seq": 0,
        "require_tts": True, "content": {"voice_mode": "BASE64", "voice": base64.b64encode(pcm).decode()}}))
    sent = time.monotonic()
    out = {"transcript": None, "text": "", "voice_bytes": 0, "t_transcript": None,
           "t_text": None, "t_audio": None, "error": None}
    while True:
        v = json.loads(await asyncio.wait_for(ws.recv(), 180))
        if v["msg_type"] == "HEARTBEAT":
            await ws.send(frame("HEARTBEAT_REPLY", session, {}))
            continue
        p = v["payload"]
        now = time.monotonic() - sent
        if v["msg_type"] == "ERROR":
            out["error"] = p
            return out
        if p.get("transcript") is not None:
            out["transcript"], out["t_transcript"] = p["transcript"], now
            continue
        c = p.get("content") or {}
        if c.get("text"):
            out["text"] += c["text"]
            out["t_text"] = out["t_text"] or now
        if c.get("voice"):
            out["voice_bytes"] += len(base64.b64decode(c["voice"]))
            out["t_audio"] = out["t_audio"] or now
        if p.get("text_stream_seq") == -1 and p.get("voice_stream_seq", -1) == -1:
            out["t_end"] = now
            return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--raw", required=True, help="16 kHz s16le mono PCM")
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    pcm = open(a.raw, "rb").read()
    async with websockets.connect(a.url, max_size=None) as ws:
        await ws.send(frame("REGISTER", "", {"auth": {"type": "API_KEY", "api_key": a.key},
                                             "platform": "WEB", "require_tts": True,
                                             "enable_srs": False, "function_calling": []}))
        ack = json.loads(await ws.recv())
        assert ack["msg_type"] == "REGISTER_ACK", ack
        session = ack["payload"]["session_id"]
        firsts = []
        for i in range(a.runs):
            r = await one(ws, session, pcm, f"probe-{i}")
            r["voice_seconds"] = round(r["voice_bytes"] / 32000, 2)
            print(json.dumps(r, ensure_ascii=False))
            if r["t_audio"] is not None:
                firsts.append(r["t_audio"])
        if firsts:
            print(f"end of upload -> first audio byte: median {statistics.median(firsts):.2f} s over {len(firsts)} runs")


if __name__ == "__main__":
    asyncio.run(main())
