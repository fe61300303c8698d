"""MFCC features with deltas (NumPy only), 10 ms hop by default.

Frame t stands for the audio [h t, h t + h) ms (h: the hop, 10 ms by
default): its 25 ms window is centred on h t + h/2 ms, so a boundary found
at frame t is at h t ms. An utterance of n samples has floor(n / hop) frames
(hop = rate * h samples, fractional at 22050 Hz: each window starts at its
own rounded sample). Per utterance: pre-emphasis, Hamming window, power
spectrum, 40 mel bands, log, DCT to 13 cepstra (c0 included), deltas and
accelerations over +-20 ms (+-2 frames at 10 ms), then mean and variance
normalised over the utterance -> [T, 39].
"""

import numpy as np

HOP_S = 0.010
WIN_S = 0.025
N_MELS = 40
N_CEPS = 13
PREEMPH = 0.97


def _mel(f):
    return 2595.0 * np.log10(1.0 + f / 700.0)


def _mel_inv(m):
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


_BANKS = {}


def mel_bank(rate, n_fft, n_mels=N_MELS, fmin=20.0, fmax=None):
    """Triangular mel filters [n_mels, n_fft // 2 + 1]."""
    key = (rate, n_fft, n_mels, fmin, fmax)
    if key in _BANKS:
        return _BANKS[key]
    fmax = fmax or rate / 2.0
    edges = _mel_inv(np.linspace(_mel(fmin), _mel(fmax), n_mels + 2))
    freqs = np.arange(n_fft // 2 + 1) * rate / n_fft
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    bank = np.maximum(0.0, np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)))
    _BANKS[key] = bank
    return bank


def _dct_matrix(n_in, n_out):
    k = np.arange(n_out)[:, None]
    n = np.arange(n_in)[None, :]
    d = np.cos(np.pi * k * (2 * n + 1) / (2 * n_in)) * np.sqrt(2.0 / n_in)
    d[0] /= np.sqrt(2.0)
    return d


def deltas(c, width=2):
    """Regression deltas over +-width frames (edges repeated) [T, D]."""
    t = len(c)
    pad = np.concatenate([np.repeat(c[:1], width, 0), c, np.repeat(c[-1:], width, 0)])
    num = sum(k * (pad[width + k:width + k + t] - pad[width - k:width - k + t])
              for k in range(1, width + 1))
    return num / (2.0 * sum(k * k for k in range(1, width + 1)))


def n_frames(n_samples, rate, hop_s=HOP_S):
    return int(np.floor(n_samples / (rate * hop_s) + 1e-9))


def log_mel(samples, rate, hop_s=HOP_S):
    """log mel energies [T, N_MELS] (float64), and T."""
    hop = rate * hop_s
    win = int(round(rate * WIN_S))
    n_fft = 1 << (win - 1).bit_length()
    x = np.asarray(samples, np.float64)
    x = np.append(x[0], x[1:] - PREEMPH * x[:-1])
    t = n_frames(len(x), rate, hop_s)
    starts = np.round((np.arange(t) + 0.5) * hop - win / 2.0).astype(np.int64)
    pad = win
    xp = np.pad(x, (pad, pad + win))
    frames = xp[(starts + pad)[:, None] + np.arange(win)[None, :]] * np.hamming(win)
    power = np.abs(np.fft.rfft(frames, n_fft, axis=1)) ** 2
    energies = power @ mel_bank(rate, n_fft).T
    return np.log(np.maximum(energies, 1e-10)), t


def cepstra(samples, rate, hop_s=HOP_S):
    """The 13 MFCCs [T, N_CEPS], float32: what a feature cache keeps (the
    deltas and the normalisation are made from them by from_cepstra, so
    cached and fresh features are the same bits)."""
    logmel, _ = log_mel(samples, rate, hop_s)
    return (logmel @ _dct_matrix(N_MELS, N_CEPS).T).astype(np.float32)


def from_cepstra(c, hop_s=HOP_S):
    """[T, 39] float32 from cepstra [T, 13]: the cepstra, deltas,
    accelerations, normalised per utterance to mean 0, variance 1."""
    c = np.asarray(c, np.float64)
    # the deltas' window is +-20 ms whatever the hop
    width = max(1, int(round(0.020 / hop_s)))
    d = deltas(c, width)
    f = np.concatenate([c, d, deltas(d, width)], axis=1)
    f = (f - f.mean(0)) / np.maximum(f.std(0), 1e-8)
    return f.astype(np.float32)


def mfcc(samples, rate, hop_s=HOP_S):
    """[T, 39] float32: 13 MFCCs, deltas, accelerations; normalised per
    utterance to mean 0, variance 1."""
    return from_cepstra(cepstra(samples, rate, hop_s), hop_s)
