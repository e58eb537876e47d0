"""Make the caller clips the real-audio voice tests and bench §10 play (issue 19).

    python tests/audio/make_clips.py            # rewrite every clip and manifest.json here
    python tests/audio/make_clips.py --check    # make them in a scratch dir and compare (CI)

``--check`` fails (exit 1) when a clip is missing or its length is off by more than 20% from the
committed one; byte-for-byte equality is reported, not required, because another espeak-ng
release says the same words slightly differently.

Speech comes from espeak-ng (fixed voices and rates), everything else from sox's synth
(repeatable mode, so the noise is the same every run); both are Debian packages that .ci/run
installs. Every clip is 16 kHz mono 16-bit, trimmed so its first sample is the acoustic onset.
``manifest.json`` gives each clip its kind and the transcript an STT would return for it ("" for
sounds no STT writes words for: fillers, coughs, clicks, noise).

The WAVs are committed (about 1 MB in all), so ``make test`` needs neither tool.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
RATE = 16000

# name: (kind, voice, words per minute, what espeak-ng says, what an STT writes)
SPOKEN: dict[str, tuple[str, str, int, str, str]] = {
    # words: a caller who means to interrupt
    "wait_no_neon": ("words", "en-us", 165, "wait, no, I meant neon", "wait no I meant neon"),
    "stop_that": ("words", "en-us", 165, "stop that", "stop that"),
    "is_it_done": ("words", "en-us+f3", 160, "is it done yet", "is it done yet"),
    "cancel_that": ("words", "en-gb", 165, "actually, cancel that", "actually cancel that"),
    "hold_on": ("words", "en-us+f3", 170, "hold on, one more thing", "hold on one more thing"),
    "other_date": ("words", "en-gb+m3", 160, "check another date", "check another date"),
    "never_mind": ("words", "en-us", 170, "never mind that", "never mind that"),
    "which_card": ("words", "en-gb", 160, "which card was it", "which card was it"),
    # backchannels: words that only say "go on"
    "mm_hm": ("backchannel", "en-us", 160, "mm hmm", "mm-hm"),
    "mm_hm_f": ("backchannel", "en-gb+f3", 160, "mm hmm", "mm-hmm"),
    "uh_huh": ("backchannel", "en-us", 160, "uh huh", "uh-huh"),
    "uh_huh_f": ("backchannel", "en-gb+f3", 160, "uh huh", "Uh-huh."),
    "yeah": ("backchannel", "en-us", 160, "yeah", "yeah"),
    "yeah_f": ("backchannel", "en-gb+f3", 160, "yeah", "Yeah."),
    "okay": ("backchannel", "en-us", 160, "okay", "okay"),
    "okay_f": ("backchannel", "en-gb+f3", 160, "okay", "OK."),
    "right": ("backchannel", "en-us", 160, "right", "right"),
    "right_f": ("backchannel", "en-gb+f3", 160, "right", "Right."),
    "sure": ("backchannel", "en-us", 160, "sure", "sure"),
    "sure_f": ("backchannel", "en-gb+f3", 160, "sure", "Sure."),
    # voiced sounds without words (an STT with filler words off writes nothing)
    "uh_short": ("voiced", "en-us", 220, "uh", ""),
    "uh": ("voiced", "en-us", 160, "uh", ""),
    "hmm_short": ("voiced", "en-us", 260, "hmm", ""),
    "hmm": ("voiced", "en-us", 160, "hmm", ""),
    "um": ("voiced", "en-gb+f3", 160, "um", ""),
    "ah": ("voiced", "en-gb", 160, "ah", ""),
}

# name: sox arguments after "-n <out>"; peak levels well below full scale, as a phone line has
SYNTH: dict[str, list[str]] = {
    # a cough: a burst of shaped noise with a fast attack
    "cough": "synth 0.28 pinknoise band 900 700 fade q 0.01 0.28 0.2 gain -6".split(),
    "cough_low": "synth 0.35 brownnoise band 500 400 fade q 0.02 0.35 0.25 gain -4".split(),
    "click": "synth 0.004 square 2000 fade q 0.001 0.004 0.002 gain -10 pad 0 0.02".split(),
    "clicks": (
        "synth 0.004 square 1800 fade q 0.001 0.004 0.002 gain -10 pad 0 0.15 repeat 3".split()
    ),
    "noise_burst": "synth 0.12 whitenoise fade q 0.005 0.12 0.05 gain -12".split(),
    "thud": "synth 0.09 sine 70 fade q 0.005 0.09 0.07 gain -3".split(),
}

# the room: steady low noise under everything, about -40 dBFS RMS
ROOM = "synth 6 pinknoise lowpass 2500 gain -26".split()


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def _trim(src: Path, dst: Path) -> None:
    """16 kHz mono 16-bit, leading and trailing silence cut: the first sample is the onset."""
    _run(
        "sox", "-R", "-D", str(src), "-r", str(RATE), "-c", "1", "-b", "16", str(dst),
        "silence", "1", "0.005", "1%", "reverse", "silence", "1", "0.005", "1%", "reverse",
    )  # fmt: skip


def make(out: Path) -> dict[str, dict[str, object]]:
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kind, voice, wpm, said, heard) in SPOKEN.items():
            raw = Path(tmp) / f"{name}.wav"
            _run("espeak-ng", "-v", voice, "-s", str(wpm), "-w", str(raw), said)
            _trim(raw, out / f"{name}.wav")
            manifest[name] = {"kind": kind, "transcript": heard, "voice": voice, "wpm": wpm}
    for name, effects in SYNTH.items():
        _run("sox", "-R", "-D", "-n", "-r", str(RATE), "-c", "1", "-b", "16",
             str(out / f"{name}.wav"), *effects)  # fmt: skip
        manifest[name] = {"kind": "noise", "transcript": ""}
    _run("sox", "-R", "-D", "-n", "-r", str(RATE), "-c", "1", "-b", "16",
         str(out / "room.wav"), *ROOM)  # fmt: skip
    manifest["room"] = {"kind": "room", "transcript": ""}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed clips")
    args = parser.parse_args()
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (apt-get install espeak-ng sox)", file=sys.stderr)
            return 2
    if not args.check:
        made = make(HERE)
        print(f"{len(made)} clips in {HERE}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        made = make(Path(tmp))
        committed = json.loads((HERE / "manifest.json").read_text())
        problems = [f"{n}: not made" for n in committed if n not in made]
        problems += [f"{n}: not committed" for n in made if n not in committed]
        for name in set(made) & set(committed):
            new, old = _seconds(Path(tmp) / f"{name}.wav"), _seconds(HERE / f"{name}.wav")
            if abs(new - old) > 0.2 * old:
                problems.append(f"{name}: {new:.3f} s now, {old:.3f} s committed")
        names = [f"{n}.wav" for n in made] + ["manifest.json"]
        same, differ, missing = filecmp.cmpfiles(tmp, HERE, names, shallow=False)
    if problems:
        print(
            "clips differ from the committed ones: " + "; ".join(sorted(problems)), file=sys.stderr
        )
        return 1
    print(
        f"{len(made)} clips made; {len(same)} of {len(names)} files identical to the committed ones"
    )
    return 0


def _seconds(path: Path) -> float:
    with wave.open(str(path), "rb") as w:
        return w.getnframes() / w.getframerate()


if __name__ == "__main__":
    sys.exit(main())
