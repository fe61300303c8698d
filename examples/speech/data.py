"""Speech with exact phone timings, synthesised by espeak-ng (ctypes).

espeak-ng reports every phoneme it speaks with the sample where it starts
(espeakEVENT_PHONEME, event->sample): that is the ground truth the aligner is
judged against. ``build(out_dir, n, seed)`` writes n utterances, reproducibly
from the seed, with voices, speaking rate and pitch drawn at random, and
sentences taken from text every Debian system ships (the licence texts under
/usr/share/common-licenses).

The text, voice, rate, pitch, padding and noise of utterance i depend only on
(seed, i). espeak-ng itself is not bit-reproducible: the same call can give speech some
tenths of a percent longer or shorter, so a rebuilt utterance differs slightly
(its timings are still exact for its own audio).

An utterance: utt_NNNNN.wav (16-bit mono, 22050 Hz) and an entry in
manifest.json: text, voice, rate, pitch, num_samples, phones (names; pauses
and the silence padded at both ends are "sil") and starts (the first sample
of each phone; phone i lasts until starts[i+1], the last until num_samples).
"""

import ctypes
import ctypes.util
import glob
import json
import os
import re
import wave

import numpy as np

VOICES = ("en-us", "en", "en-gb-x-rp", "en-gb-scotland", "en-029", "en-gb-x-gbclan",
          "en-gb-x-gbcwmd")
VARIANTS = ("", "+m1", "+m2", "+m3", "+m4", "+f1", "+f2", "+f3", "+f4")
RATE_WPM = (130, 220)
PITCH = (25, 75)          # espeak's 0..100 scale, 50 is the voice's default
SILENCE_S = (0.10, 0.40)  # silence padded before and after the speech
NOISE_STD = (4.0, 40.0)   # white noise added (16-bit units), so no frame is digital zero
TEXT_GLOB = "/usr/share/common-licenses/*"
SIL = "sil"

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 1
_EVENT_PHONEME = 7
_RATE, _PITCH = 1, 3
_CHARS_UTF8 = 1
_POS_CHARACTER = 1


class EspeakMissing(RuntimeError):
    """libespeak-ng cannot be loaded (not installed)."""


INSTALL_HINT = "sudo apt-get install -y espeak-ng libespeak-ng-dev"


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p),
                ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
                ("text_position", ctypes.c_int), ("length", ctypes.c_int),
                ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", _EventId)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.POINTER(_Event))


class Espeak:
    """One synchronous espeak-ng engine reporting phoneme events."""

    def __init__(self):
        path = ctypes.util.find_library("espeak-ng")
        try:
            self.lib = ctypes.CDLL(path or "libespeak-ng.so.1")
        except OSError as e:
            raise EspeakMissing(f"libespeak-ng not found ({e}); install it with: "
                                f"{INSTALL_HINT}") from None
        self.sample_rate = self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None,
                                                      _INITIALIZE_PHONEME_EVENTS)
        if self.sample_rate <= 0:
            raise EspeakMissing("espeak_Initialize failed (espeak-ng-data missing?); "
                                f"install with: {INSTALL_HINT}")
        self._audio, self._events = [], []
        self._cb = _CALLBACK(self._collect)  # kept alive as long as the engine
        self.lib.espeak_SetSynthCallback(self._cb)
        self.lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint,
                                          ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                          ctypes.c_void_p, ctypes.c_void_p]

    def _collect(self, wav, n, events):
        if wav and n > 0:
            self._audio.append(np.ctypeslib.as_array(wav, (n,)).copy())
        i = 0
        while events[i].type != 0:
            e = events[i]
            if e.type == _EVENT_PHONEME:
                name = bytes(e.id.string).split(b"\0")[0].decode("utf-8", "replace")
                self._events.append((int(e.sample), name))
            i += 1
        return 0

    def say(self, text, voice, rate, pitch):
        """(int16 samples, [(start sample, phoneme name)]) of one text."""
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise ValueError(f"espeak-ng: unknown voice {voice!r}")
        self.lib.espeak_SetParameter(_RATE, int(rate), 0)
        self.lib.espeak_SetParameter(_PITCH, int(pitch), 0)
        self._audio, self._events = [], []
        raw = text.encode("utf-8")
        st = self.lib.espeak_Synth(raw, len(raw) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8,
                                   None, None)
        if st != 0:
            raise RuntimeError(f"espeak_Synth failed with status {st}")
        self.lib.espeak_Synchronize()
        audio = np.concatenate(self._audio) if self._audio else np.zeros(0, np.int16)
        return audio, list(self._events)


def sentences(pattern=TEXT_GLOB, min_words=4, max_words=20):
    """Plain English sentences from the text files matching pattern, in a
    fixed order, without duplicates."""
    out, seen = [], set()
    for path in sorted(glob.glob(pattern)):
        if os.path.isdir(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = " ".join(f.read().split())
        except OSError:
            continue
        for s in re.split(r"(?<=[.!?])\s+", text):
            s = s.strip()
            words = s.split()
            if not min_words <= len(words) <= max_words:
                continue
            s = re.sub(r"[\"()]", "", s)
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9 ,;:'\-]*[a-z][.!?]", s):
                continue
            if s.lower() not in seen:
                seen.add(s.lower())
                out.append(s)
    return out


def segments(events, n_speech, pad_before, n_total):
    """Phones and their start samples in the padded audio from espeak's
    phoneme events: pauses ("_", "_:", ...) and the padding become "sil",
    phones of no duration are dropped, neighbouring silences merged."""
    marks = [(0, SIL)] + [(pad_before + s, SIL if name.startswith("_") else name)
                          for s, name in events if 0 <= s <= n_speech]
    marks.append((pad_before + n_speech, SIL))
    phones, starts = [], []
    for i, (s, name) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else n_total
        if end <= s:
            continue
        if phones and phones[-1] == SIL and name == SIL:
            continue
        phones.append(name)
        starts.append(int(s))
    return phones, starts


def write_wav(path, samples, rate):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, "<i2").tobytes())


def read_wav(path):
    """(float32 samples in [-1, 1), sample rate)."""
    with wave.open(path, "rb") as w:
        rate = w.getframerate()
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0, rate


def build(out_dir, n, seed=0, part="train", progress=None):
    """Writes n utterances and manifest.json into out_dir (reproducible from
    seed) and returns the manifest (a list of dicts). part: "train" or
    "test": held-out sets take their sentences from every fifth sentence,
    training sets from the others, so no test sentence is ever trained on.
    progress: an optional callable(done, total)."""
    if part not in ("train", "test"):
        raise ValueError(f"build: part must be 'train' or 'test', got {part!r}")
    engine = Espeak()
    texts = [s for i, s in enumerate(sentences()) if (i % 5 == 0) == (part == "test")]
    if not texts:
        raise RuntimeError(f"no sentences found under {TEXT_GLOB}")
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "cepstra-*.npz")):
        os.remove(old)  # features of the audio this replaces
    manifest = []
    for i in range(n):
        # one generator per utterance: espeak-ng's output length varies between
        # runs, which must not shift the draws of later utterances
        rng = np.random.default_rng([seed, i])
        text = texts[int(rng.integers(len(texts)))]
        voice = VOICES[int(rng.integers(len(VOICES)))] + VARIANTS[int(rng.integers(len(VARIANTS)))]
        rate = int(rng.integers(RATE_WPM[0], RATE_WPM[1] + 1))
        pitch = int(rng.integers(PITCH[0], PITCH[1] + 1))
        speech, events = engine.say(text, voice, rate, pitch)
        sr = engine.sample_rate
        pad_a = int(rng.uniform(*SILENCE_S) * sr)
        pad_b = int(rng.uniform(*SILENCE_S) * sr)
        noise = rng.normal(0.0, rng.uniform(*NOISE_STD), len(speech) + pad_a + pad_b)
        audio = noise
        audio[pad_a:pad_a + len(speech)] += speech
        audio = np.clip(np.round(audio), -32768, 32767).astype(np.int16)
        phones, starts = segments(events, len(speech), pad_a, len(audio))
        name = f"utt_{i:05d}.wav"
        write_wav(os.path.join(out_dir, name), audio, sr)
        manifest.append(dict(wav=name, text=text, voice=voice, rate=rate, pitch=pitch,
                             sample_rate=sr, num_samples=int(len(audio)), phones=phones,
                             starts=starts))
        if progress:
            progress(i + 1, n)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(dict(seed=seed, n=n, part=part, utterances=manifest), f)
    return manifest


def load(out_dir):
    """The manifest written by build."""
    with open(os.path.join(out_dir, "manifest.json")) as f:
        return json.load(f)["utterances"]
