"""TD(lambda) in the backward view: traces on a fixed ladder of timescales, TD(0) on a draw beside it.

A Γ-net learns TD(lambda) in the forward view by default (:mod:`gamma_net_core.linear.lambda_return`),
which keeps the reach this view gives up (below, "The reach given up"); this view is a Γ-net's with
``lambda_view`` "backward", the Horde's (:mod:`gamma_net_core.horde`), and, with one gamma and no draw,
the fixed-timescale baseline's.

Why a fixed set. The backward view of TD(lambda) at one discount gamma keeps
z_t = gamma lambda z_{t-1} + x(S_t, gamma) and moves the weights by alpha delta_t z_t; z_t is the
sum of that gamma's past feature vectors, so it only exists for a gamma trained on at every past
step. Algorithm 1 draws Gamma_t afresh each step: a drawn gamma has no past, and a trace per slot
of Gamma_t would mix feature vectors of unrelated timescales. So with lambda > 0 the traces belong
to one fixed Gamma = {gamma_1 .. gamma_K}, the sampling's ladder
(:func:`gamma_net_core.timescales.ladder`: the bounds and the midpoints of equal-probability
strata, the same size and spread as a draw), one trace per gamma_k::

    z_k   = gamma_k lambda c_t z_k + x(S_t, gamma_k)      (c_t: continuation of S_t; 0 cuts the trace)
    delta_k = s_k C_{t+1} + gamma_k c_{t+1} f(S_{t+1}, gamma_k) - f(S_t, gamma_k)
    w    += alpha (1 - lambda) * sum_k delta_k z_k

(accumulating traces; s_k, f and the TD errors are those of :mod:`gamma_net_core.linear`, with the
weights before that update). The step is alpha (1 - lambda): an accumulating trace sums about
1 / (1 - gamma lambda) feature vectors, so at alpha itself a TD(lambda) step reaches some ten
times further than a TD(0) step at lambda 0.9 (and diverged on the Horde's event question).
With alpha decayed (``step_size_decay_steps`` > 0) the traced step decays to 0 over the first half
of that decay (:func:`traced_decay_steps`), so the learner ends as TD(0) on the draws: the traces
carry returns back while the values are far off, and are gone where what is left is noise, which a
lambda-return with a rare large cumulant has more of (at the full decay TD(lambda) ended up to 1.9x
TD(0)'s error on the sparse chain of tests/test_lambda_between.py; docs/results.md). With a
constant alpha, and for one timescale without a draw (``FixedTimescaleTD``), the traced step is
alpha (1 - lambda) decayed as alpha is.

Twice the step. Beside the draw's TD(0) at alpha, the traced update adds about alpha more (its trace
sums about 1 / (1 - gamma lambda) feature vectors, at alpha (1 - lambda)), so a learner with lambda > 0
takes about twice the step of lambda = 0, and lambda -> 0 is TD(0) at about 2 alpha, not lambda = 0.
On the chains of tests/test_lambda_between.py that step, not the traces' reach, is what made
TD(lambda) better than TD(0) on the ring's event question and worse on the sparse chains' (lambda 0.1
gains and loses as much as 0.5; with the step matched to TD(0)'s, every lambda measured is within 6 %
of TD(0) there, ten seeds: docs/results.md). Compare a lambda against a small one (0.1), or against
TD(0) at a larger alpha, not against lambda = 0 at the same alpha.

The reach given up. The traced step alpha (1 - lambda) keeps the update's size, and with it the speed
of TD(0): TD(lambda)'s slowest mode, the one a long timescale waits on, closes at
alpha (1 - lambda)(1 - gamma) / (1 - gamma lambda) a step, which tends to TD(0)'s alpha (1 - gamma) as
gamma -> 1. Textbook TD(lambda) at alpha is faster than TD(0) on the event questions of those chains
(tabular, one gamma, ten seeds: 0.38-0.90x TD(0)'s error over the learning curve at lambda 0.9); the
traces alone at alpha (1 - lambda) are not (1.00-1.05x at 0.5, 1.14-1.49x at 0.9). A traced step of about
alpha that stays stable where the timescale tiles and the bias share weights across rungs is not built
here (docs/results.md, "The traced step gives the reach up"); the forward view moves each state at alpha itself.

Between the rungs. Training only the ladder's gammas leaves the timescales between them to the
timescale inputs' tile coding, which does not carry the rungs' values there: with tiles narrower
than the gap between two rungs some tiles between them are never trained, and with wider ones the
coding interpolates linearly between the rungs, not the value's curve (on an 8-state ring with
8 tilings of 1/8, TD(lambda) on the 32-rung arm ladder alone was 0.18 off at tau 3.7, between its
rungs 2.71 and 6.12, where TD(0) on drawn Gamma_t was 0.008: docs/results.md). So with lambda > 0
Gamma_t is the ladder followed by a draw of the sampling (``TimescaleSampler(..., fixed=True)``
gives both, [2K]), and each step first makes Algorithm 1's TD(0) update on the draw (at alpha),
then the TD(lambda) update above on the ladder, with the weights the first left. Every timescale
between tau_min and tau_max is trained as Algorithm 1 trains it, while the traces carry long
returns and events back on the rungs. Denser ladders (rungs no further apart than the timescale
tiles generalize) were measured too and did worse between the rungs (docs/results.md). The cost
is a TD(0) step more than the traces alone. For one gamma TD(lambda) is linear TD(lambda) on f,
whose fixed point on-policy with a representable value is the exact value for every lambda, and
TD(0) shares it, so the two updates pull to the same values. lambda = 0 is Algorithm 1 unchanged (its
draws and kernels; no ladder).
A termination (``terminal``, or a question's continuation 0) cuts the traces, so no TD error
reaches back past it. In a Horde the features are shared, so questions with the same
continuation share their traces: the cost is paid once per continuation, not per question.

A trace is stored dense ([K, n_features]) with the list of features it has touched (its support):
with tile coding a trace touches only the tiles the recent states visited, so decay and update
cost O(support), not O(n_features). An entry that decays below :data:`DROP` (1e-12: some 240
steps after its last visit at gamma lambda = 0.89) is set to 0 and leaves the support; the dense
NumPy reference (:class:`gamma_net_core.reference.ReferenceLinearTD`) zeroes the same entries, so
the arithmetic is the same, bit for bit. Traces are learner state: checkpoints save ``traces`` [K, n_features] and
``trace_gammas`` [K]; the support is rebuilt from the nonzero entries on load (a zero entry adds
nothing, so the rebuilt support gives the same updates).
"""

from __future__ import annotations

import numba
import numpy as np

#: A trace entry that decays below this is set to 0 and leaves the support (the reference does the same).
#: Without it an entry of a state not revisited decays for ever, through subnormal numbers whose arithmetic
#: is some 100x slower on x86: a long stream's TD(lambda) step slowed 27x (docs/benchmarks.md).
DROP = 1e-12


def traced_decay_steps(decay_steps: int) -> int:
    """Over how many updates the traced step decays to 0: half of alpha's ``decay_steps`` (0, constant, stays 0).

    With alpha decayed, the traces are used while the values are far off and bootstrapping from them
    is what slows learning, and are gone for the second half, where what is left to remove is noise
    and a lambda-return is noisier than a one-step one (lambda high early and low late is the
    schedule Kearns & Singh 2000 derive; on the test chains it is what kept TD(lambda) within 1.5x
    of TD(0) at the end: docs/results.md).
    """
    return max(1, decay_steps // 2) if decay_steps > 0 else 0


class Traces:
    """The traces of one learner (or, in a Horde, of G continuation groups), sparse over their support.

    Args:
      n_groups: traces kept per timescale (1 for a single learner; a Horde's continuation groups).
      gammas: the fixed Gamma [K] they belong to.
      n_features: the learner's feature count.
    """

    def __init__(self, n_groups: int, gammas: np.ndarray, n_features: int) -> None:
        K = gammas.shape[0]
        self.gammas = np.ascontiguousarray(gammas, dtype=np.float64)
        self.z = np.zeros((n_groups, K, n_features))
        self.in_support = np.zeros((n_groups, K, n_features), dtype=np.bool_)
        self.support = np.zeros((n_groups, K, n_features), dtype=np.int64)
        self.n_support = np.zeros((n_groups, K), dtype=np.int64)
        # Largest entry of each trace (a bound kept for the Horde's overflow check).
        self.z_max = np.zeros((n_groups, K))

    def reset(self) -> None:
        """Cut every trace (an episode ends: no TD error reaches back past it)."""
        clear(self.z, self.in_support, self.support, self.n_support)
        self.z_max[:] = 0.0

    def copy(self) -> Traces:
        out = Traces.__new__(Traces)
        out.gammas = self.gammas
        out.z, out.in_support = self.z.copy(), self.in_support.copy()
        out.support, out.n_support, out.z_max = self.support.copy(), self.n_support.copy(), self.z_max.copy()
        return out

    @classmethod
    def from_arrays(cls, gammas: np.ndarray, z: np.ndarray) -> Traces:
        """Traces with the values ``z`` [G, K, n_features] (e.g. from a checkpoint), support rebuilt."""
        out = cls(z.shape[0], gammas, z.shape[2])
        out.z[:] = z
        for g in range(z.shape[0]):
            for k in range(z.shape[1]):
                nz = np.flatnonzero(z[g, k])
                out.support[g, k, : nz.size] = nz
                out.n_support[g, k] = nz.size
                out.in_support[g, k, nz] = True
                out.z_max[g, k] = float(np.max(np.abs(z[g, k]), initial=0.0))
        return out

    @property
    def kernel_args(self) -> tuple:
        return self.z, self.in_support, self.support, self.n_support, self.z_max


@numba.njit(cache=True)
def clear(z, in_support, support, n_support):  # pragma: no cover - compiled
    for g in range(z.shape[0]):
        for k in range(z.shape[1]):
            for j in range(n_support[g, k]):
                i = support[g, k, j]
                z[g, k, i] = 0.0
                in_support[g, k, i] = False
            n_support[g, k] = 0


@numba.njit(cache=True, inline="always")
def decay_and_add(traces, g, k, decay, idx_k, bias_index, bias_x):  # pragma: no cover - compiled
    """z[g, k] = decay * z[g, k] + x, x the active features ``idx_k`` (then the bias, of value ``bias_x``); 0 cuts
    the trace first.

    A hashed tile active twice adds 1 twice, in tiling order, as ``np.add.at`` does in the reference.
    """
    z, in_support, support, n_support, z_max = traces
    n = n_support[g, k]
    if decay == 0.0:
        for j in range(n):
            i = support[g, k, j]
            z[g, k, i] = 0.0
            in_support[g, k, i] = False
        n = 0
    else:
        j = 0
        while j < n:
            i = support[g, k, j]
            z[g, k, i] *= decay
            if abs(z[g, k, i]) < DROP:  # gone: dropped before it decays into slow subnormal arithmetic
                z[g, k, i] = 0.0
                in_support[g, k, i] = False
                n -= 1
                support[g, k, j] = support[g, k, n]
            else:
                j += 1
    for t in range(idx_k.shape[0] + 1):
        x = 1.0
        if t < idx_k.shape[0]:
            i = idx_k[t]
        elif bias_index >= 0:
            i = bias_index
            x = bias_x
        else:
            break
        if not in_support[g, k, i]:
            in_support[g, k, i] = True
            support[g, k, n] = i
            n += 1
        z[g, k, i] += x
    n_support[g, k] = n
    m = 0.0
    for j in range(n):
        m = max(m, abs(z[g, k, support[g, k, j]]))
    z_max[g, k] = m


@numba.njit(cache=True, inline="always")
def save_support(traces, g, k, old_z, old_support):  # pragma: no cover - compiled
    """Copy trace (g, k)'s support and values before a step (so a refused step can be undone)."""
    z, _, support, n_support, _ = traces
    for j in range(n_support[g, k]):
        i = support[g, k, j]
        old_support[k, j] = i
        old_z[k, j] = z[g, k, i]


@numba.njit(cache=True, inline="always")
def restore_support(traces, g, k, old_z, old_support, old_n, old_max):  # pragma: no cover - compiled
    """Undo :func:`decay_and_add` on trace (g, k) from what :func:`save_support` kept."""
    z, in_support, support, n_support, z_max = traces
    for j in range(n_support[g, k]):
        i = support[g, k, j]
        z[g, k, i] = 0.0
        in_support[g, k, i] = False
    for j in range(old_n):
        i = old_support[k, j]
        support[g, k, j] = i
        z[g, k, i] = old_z[k, j]
        in_support[g, k, i] = True
    n_support[g, k] = old_n
    z_max[g, k] = old_max
