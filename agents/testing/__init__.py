"""Test helpers for frontdesk and for plugin authors: a scripted LLM, and voice calls. See
docs/plugins.md, "Testing", and docs/patterns.md, "Testing voice".

- ``frontdesk.agents.testing.caller``: ``VoiceCall`` (a call through ``start_call`` on a real
  voice ``AgentSession``) and ``CallerScript`` (what the caller says, and when);
- ``frontdesk.agents.testing.voice``: the timed-text caller on a fake VAD (Silero's timing,
  hangover included) and STT;
- ``frontdesk.agents.testing.mic``: the caller as audio: ``Clip``, ``load_clips``, a
  ``Microphone`` playing clips in real time over room noise into any ``vad.VAD`` (Silero by
  default, ``silero_vad()``), and ``ClipSTT``;
- ``frontdesk.agents.testing.audio``: the fake TTS and the pausable output that records what the
  caller heard, and where it was cut.
"""

from frontdesk.agents.testing.llm import Reply, ScriptedLLM, reply_chunk

__all__ = ["Reply", "ScriptedLLM", "reply_chunk"]
