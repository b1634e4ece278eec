"""bayesscale's sampler: compiled once per model, warm-up by windows, chains in parallel,
sampling until the effective sample size is reached, interruptible.

A fit runs as a sequence of short compiled *chunks* (about half a second each) of
transitions, MAMS's (:func:`bayesscale.sampling.mams.make_chunk`, the default) or NUTS's
(:func:`bayesscale.sampling.nuts.make_chunk`), one chain per XLA host device (``jax.pmap``).
Between chunks Python adapts the mass matrix and, for MAMS, the trajectory length
(:mod:`bayesscale.sampling.adapt`; after the third, fourth and fifth mass windows), draws the
progress bar, and handles Ctrl-C: an interrupt stops the fit within one chunk. MAMS's step
size is corrected after warm-up by ``PROBES`` probes of ``PROBE`` transitions each at a fixed
step size, in turn (dual averaging on single trajectories' acceptance leaves it too small).
After ``draws`` draws per chain the diagnostics of every stored quantity are computed; while
the minimum bulk or tail ESS is below ``ess_target`` (or R-hat above its limit) the chains
continue, up to ``max_draws``.

Example
-------
>>> density = LogDensity.from_model(model)  # doctest: +SKIP
>>> sampler = CompiledSampler(density, chains=2, kernel="mams")  # doctest: +SKIP
>>> result = sampler.run(RunSettings(seed=1))  # doctest: +SKIP
>>> result.posterior["alpha"].shape  # doctest: +SKIP
(2, 1000, 21, 3)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bayesscale.sampling import adapt
from bayesscale.sampling.config import KERNELS, MAMS_KERNEL, NUTS_KERNEL, FitConfig, default_accept
from bayesscale.sampling.diagnostics import Convergence, convergence
from bayesscale.sampling.laplace import FD_STEP
from bayesscale.sampling.logdensity import LogDensity, evaluate_over_draws
from bayesscale.sampling.mams import MAX_STEPS as MAX_MAMS_STEPS
from bayesscale.sampling.mams import make_chunk as make_mams_chunk
from bayesscale.sampling.nuts import MAX_TREE_DEPTH, make_chunk
from bayesscale.sampling.progress import Progress
from bayesscale.sampling.types import ChainState, Transitions, step_size_state

PROBE = 50  # MAMS: transitions per chain at a fixed step size, to correct it
PROBES = 2  # MAMS: probes in turn, each correcting the step size the one before measured
CAPACITY = 64  # transitions per compiled chunk at most
CHUNK_SECONDS = 0.4  # aim for chunks this long: Ctrl-C and the bar respond within about that
INITIAL_STEP = 0.1
# Initial points, overdispersed relative to the posterior (so that R-hat means something):
# draws from the Laplace approximation at the mode (L-BFGS from the model's initial point,
# the Hessian by central differences of the gradient), its covariance OVERDISPERSION^2 times
# wider, each coordinate at most MAX_START_OFFSET (unconstrained units) from the mode; where
# the log density or its gradient is not finite at a start, the spread halves and all chains
# are drawn again (MAX_INIT_TRIES times at most). Without a finite mode: the model's initial
# point + uniform(-JITTER, JITTER), halved likewise.
OVERDISPERSION = 2.0
MAX_START_OFFSET = 3.0
MODE_ITERATIONS = 100  # L-BFGS iterations at most: the starts need the bulk, not the exact mode
JITTER = 0.5
MAX_INIT_TRIES = 20
ESS_MARGIN = 1.15  # extend to the draws the ESS rate predicts, with this margin
RHAT_MAX = 1.01
MIN_EXTENSION = 100  # draws per chain added at least when the ESS target is not reached
# an extension at most quadruples the draws (the ESS rate of few draws is noisy). On the
# reference law fit, 3 took 500 -> 1,500 -> 2,010 draws (three checks of about 1 s each); 4
# takes 500 -> 2,000.
MAX_GROWTH = 4


@dataclass(frozen=True)
class RunSettings:
    """How long to run. ``draws`` per chain first; with ``ess_target > 0`` more, up to
    ``max_draws``, until every stored quantity has bulk and tail ESS >= ``ess_target`` and
    R-hat <= 1.01."""

    tune: int = 400
    draws: int = 500
    seed: int = 0
    ess_target: float = 0.0
    max_draws: int = 4000

    @classmethod
    def from_config(cls, config: FitConfig) -> RunSettings:
        """The run a fit's :class:`~bayesscale.sampling.config.FitConfig` asks for.

        >>> RunSettings.from_config(FitConfig(seed=3)).ess_target
        400
        """
        return cls(
            tune=config.tune,
            draws=config.draws,
            seed=config.seed,
            ess_target=config.ess_target,
            max_draws=config.max_draws,
        )


@dataclass
class RunResult:
    """Draws ``(chain, draw, ...)`` of every stored quantity, per-draw sampler statistics
    ``(chain, draw)`` in ArviZ's names, and where the time went."""

    posterior: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    compile_seconds: float
    warmup_seconds: float
    sampling_seconds: float
    extensions: int = 0
    inv_mass: np.ndarray | None = None
    unconstrained: np.ndarray | None = None  # (chain, draw, dim) draws the sampler moved in
    # the density's per-draw terms (LogDensity.per_draw_names), (chain, draw, ...) each
    per_draw: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # seconds in the compiled chunks of warm-up and sampling, their outputs' copies to the
    # host included (not the driver's adaptation and checks between them), and the
    # integration steps per chain of the warm-up (the draws' own are ``stats["n_steps"]``)
    transition_seconds: float = 0.0
    warmup_steps: float = 0.0
    # the last convergence check, when it was made on exactly the draws returned (the fit
    # keeps it, so reading the fit does not compute it again)
    convergence: Convergence | None = None


class CompiledSampler:
    """MAMS or NUTS (``kernel``; the package's fits pass ``FitConfig.kernel``, MAMS by
    default, and its target acceptance, ``None`` here meaning the kernel's own) for one :class:`~bayesscale.sampling.logdensity.LogDensity`, compiled on first
    use and reused by every ``run`` (pass other ``data`` of the same shapes to fit another
    dataset without recompiling)."""

    def __init__(
        self,
        density: LogDensity,
        chains: int = 4,
        target_accept: float | None = None,
        kernel: str = NUTS_KERNEL,
    ) -> None:
        import jax

        if chains < 1:
            raise ValueError(f"chains must be >= 1, got {chains}")
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; choose one of {KERNELS}")
        if target_accept is None:  # the kernel's own, as FitConfig.accept gives the law's
            target_accept = default_accept(kernel)
        self.density, self.chains, self.target_accept = density, chains, target_accept
        self.kernel = kernel
        # a value of the chunk's trajectory argument (NUTS's depth cap, MAMS's length and most
        # steps), of the type every call passes: to compile with, and for chunks of no
        # transitions
        self._any_trajectory: Any = np.array([1.0, 1.0]) if kernel == MAMS_KERNEL else 1
        n_data = len(density.data_names)

        def potential(z: Any, *data: Any) -> Any:
            return -density.logp(z, *data)

        make = make_mams_chunk if kernel == MAMS_KERNEL else make_chunk
        chunk = make(potential, CAPACITY, target_accept)
        axes = (0, 0, None, None, None, *([None] * n_data))
        if chains <= jax.local_device_count():
            self._chunk_fn = jax.pmap(chunk, in_axes=axes)
        else:
            self._chunk_fn = jax.jit(jax.vmap(chunk, in_axes=axes))
        self._derived = jax.jit(jax.vmap(density.derived))
        self._per_draw = jax.jit(jax.vmap(density.per_draw)) if density.per_draw else None
        self._compiled: Any = None
        self._placeholder_keys: np.ndarray | None = None
        self._start_variance: np.ndarray | None = None
        self.compile_seconds = 0.0

    @classmethod
    def from_config(cls, density: LogDensity, config: FitConfig) -> CompiledSampler:
        """The sampler a fit's config names: its chains, kernel and target acceptance."""
        return cls(density, chains=config.chains, target_accept=config.accept, kernel=config.kernel)

    # --- pieces -----------------------------------------------------------------------

    def _compile(self, state: ChainState, inv_mass: Any, data: tuple[Any, ...]) -> None:
        if self._compiled is not None:
            return
        start = time.perf_counter()
        self._compiled = self._chunk_fn.lower(
            state, inv_mass, 1, True, self._any_trajectory, *data
        ).compile()
        self.compile_seconds += time.perf_counter() - start

    def _state(self, z: np.ndarray) -> ChainState:
        """A chain state at ``z`` (chain, dim), its potential and gradient not yet evaluated."""
        import jax

        blank = np.zeros(self.chains)
        if self._placeholder_keys is None:
            self._placeholder_keys = np.asarray(
                jax.random.split(jax.random.PRNGKey(0), self.chains)
            )
        placeholder_keys = self._placeholder_keys
        state = ChainState(
            np.asarray(z, dtype=float),
            blank,
            np.zeros_like(z, dtype=float),
            placeholder_keys,  # the chains' own keys are drawn once a start is found
            step_size_state(blank + INITIAL_STEP),
        )
        return jax.tree.map(np.asarray, state)

    def _evaluate(self, z: np.ndarray, data: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Potential and gradient at ``chains`` points ``z`` (chain, dim), by the compiled
        chunk with no transitions (which compiles it if it is not yet)."""
        state = self._state(z)
        unit_mass = np.ones((self.chains, z.shape[1]))
        self._compile(state, unit_mass, data)
        evaluated, _ = self._compiled(state, unit_mass, 0, True, self._any_trajectory, *data)
        return np.asarray(evaluated.potential), np.asarray(evaluated.grad)

    def _evaluate_points(self, points: np.ndarray, data: tuple[Any, ...]) -> np.ndarray:
        """Gradients at any number of points (n, dim), ``chains`` at a time."""
        out = np.empty_like(points)
        for i in range(0, len(points), self.chains):
            batch = points[i : i + self.chains]
            padded = np.concatenate([batch, np.repeat(batch[-1:], self.chains - len(batch), 0)])
            out[i : i + len(batch)] = self._evaluate(padded, data)[1][: len(batch)]
        return out

    def laplace_start(self, data: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray | None]:
        """The centre of the starts and the factor ``L`` of the Laplace covariance
        (``L L^T = H^-1`` at the mode; ``None`` where the density is not finite at the
        model's initial point, or the mode found is not finite)."""
        from scipy import optimize

        x0 = np.asarray(self.density.x0, dtype=float)
        pe, _ = self._evaluate(np.tile(x0, (self.chains, 1)), data)
        if not np.isfinite(pe[0]):
            return x0, None

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            value, grad = self._evaluate(np.tile(x, (self.chains, 1)), data)
            if not np.isfinite(value[0]) or not np.all(np.isfinite(grad[0])):
                return np.inf, np.zeros_like(x)
            return float(value[0]), np.asarray(grad[0], dtype=float)

        found = optimize.minimize(
            fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": MODE_ITERATIONS}
        )
        mode = np.asarray(found.x, dtype=float)
        if not np.isfinite(fun(mode)[0]):
            return x0, None
        n = mode.size
        steps = np.eye(n) * FD_STEP
        grads = self._evaluate_points(np.concatenate([mode + steps, mode - steps]), data)
        hessian = (grads[:n] - grads[n:]).T / (2 * FD_STEP)
        hessian = 0.5 * (hessian + hessian.T)
        if not np.all(np.isfinite(hessian)):
            return mode, None
        # L with L L^T = H^-1, H's eigenvalues in absolute value and at least
        # 1 / MAX_START_OFFSET^2: a flat direction is capped by the offset clip anyway
        eigenvalues, vectors = np.linalg.eigh(hessian)
        eigenvalues = np.maximum(np.abs(eigenvalues), MAX_START_OFFSET**-2)
        return mode, vectors / np.sqrt(eigenvalues)

    def _starts(self, rng: np.random.Generator, data: tuple[Any, ...]) -> ChainState:
        """Overdispersed starts with finite potential and gradient, one per chain: draws
        from the Laplace approximation ``OVERDISPERSION`` times wider (see ``OVERDISPERSION``),
        evaluated by the compiled chunk with no transitions."""
        import jax

        centre, factor = self.laplace_start(data)
        # the Laplace approximation's variances: the first inverse mass (where there is one)
        self._start_variance = None if factor is None else np.sum(factor**2, axis=1)
        dim = centre.size
        spread = OVERDISPERSION
        for _ in range(MAX_INIT_TRIES):
            if factor is None:
                offset = rng.uniform(-JITTER, JITTER, size=(self.chains, dim)) * spread / 2
            else:
                normal = rng.standard_normal((self.chains, dim))
                offset = np.clip(spread * normal @ factor.T, -MAX_START_OFFSET, MAX_START_OFFSET)
            z = centre + offset
            pe, grad = self._evaluate(z, data)
            if np.all(np.isfinite(pe)) and np.all(np.isfinite(grad)):
                keys = jax.random.split(jax.random.PRNGKey(int(rng.integers(2**31))), self.chains)
                return self._state(z)._replace(potential=pe, grad=grad, key=np.asarray(keys))
            spread /= 2
        raise FloatingPointError(
            "the model's log density or its gradient is not finite at its initial point "
            "(even without jitter): check the data for impossible values"
        )

    def derive(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """Stored quantities for draws ``z`` of shape ``(chain, draw, dim)``."""
        return evaluate_over_draws(self._derived, self.density.var_names, z)

    def per_draw(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """The density's per-draw terms for draws ``z`` of shape ``(chain, draw, dim)``."""
        if self._per_draw is None:
            return {}
        return evaluate_over_draws(self._per_draw, self.density.per_draw_names, z)

    # --- a run --------------------------------------------------------------------------

    def run(
        self,
        settings: RunSettings,
        data: Sequence[Any] | None = None,
        progress: Progress | None = None,
    ) -> RunResult:
        """Warm up and sample; see :class:`RunSettings`."""
        import jax.numpy as jnp

        values = data if data is not None else self.density.data_values
        data_t = tuple(jnp.asarray(v) for v in values)
        rng = np.random.default_rng(settings.seed)
        state = self._starts(rng, data_t)
        if self._start_variance is not None:  # the Laplace approximation's, at the mode
            inv_mass = np.tile(self._start_variance, (self.chains, 1))
        else:  # nutpie's, from the gradients at the starts
            inv_mass = adapt.initial_inv_mass(state.grad)
        mams = self.kernel == MAMS_KERNEL
        probes = PROBES if mams and settings.tune > 0 else 0
        warmup = settings.tune + probes * PROBE  # transitions per chain before the draws kept
        run = _Run(self, state, inv_mass, data_t, progress or Progress(enabled=False), warmup)
        run.work.total = warmup + settings.draws

        warm_start = time.perf_counter()
        warmup_steps = run.warm_up(settings.tune, probes)
        warmup_seconds = time.perf_counter() - warm_start
        sample_start = time.perf_counter()
        kept, extensions, notes, check = run.sample(settings)
        sampling_seconds = time.perf_counter() - sample_start

        joined = Transitions(*(np.concatenate(parts, axis=1) for parts in zip(*kept, strict=True)))
        stats = {
            "diverging": joined.diverging,
            "n_steps": joined.steps,
            "acceptance_rate": joined.accept,
            "lp": -joined.potential,
            "step_size": joined.step_size,
        }
        if not mams:  # MAMS builds no tree and has no Hamiltonian energy to report
            stats |= {"tree_depth": joined.depth, "energy": joined.energy}
        else:  # MAMS's energy slot: the proposal's energy error dU + dK (mams.make_chunk)
            stats["energy_error"] = joined.energy
        return RunResult(
            posterior=self.derive(joined.z),
            stats=stats,
            compile_seconds=self.compile_seconds,
            warmup_seconds=warmup_seconds,
            sampling_seconds=sampling_seconds,
            extensions=extensions,
            inv_mass=np.asarray(run.inv_mass),
            unconstrained=joined.z,
            per_draw=self.per_draw(joined.z),
            notes=notes,
            convergence=check,
            transition_seconds=run.in_chunks,
            warmup_steps=float(warmup_steps.mean()),
        )


class _Run:
    """One :meth:`CompiledSampler.run` under way: the chains' state, the inverse mass and
    (MAMS) trajectory length adaptation has reached, the chunk clock and the counts the bar
    shows. Warm-up and sampling advance it chunk by chunk."""

    def __init__(
        self,
        sampler: CompiledSampler,
        state: ChainState,
        inv_mass: Any,
        data: tuple[Any, ...],
        progress: Progress,
        warmup: int,
    ) -> None:
        self.sampler, self.state, self.inv_mass, self.data = sampler, state, inv_mass, data
        self.progress, self.warmup = progress, warmup
        self.mams = sampler.kernel == MAMS_KERNEL
        self.work = _Work(0)
        self.clock = _Clock()
        self.divergences = 0
        self.in_chunks = 0.0  # seconds inside compiled chunks
        self.length = math.sqrt(sampler.density.dim)  # MAMS: trajectory length, whitened units

    def steps_for(self, cap: int) -> Any:
        """The chunk's trajectory argument: NUTS's tree depth cap, or MAMS's trajectory
        length and the most steps a transition takes on average (``2^cap``)."""
        if not self.mams:
            return cap
        return np.array([self.length, min(2.0**cap, MAX_MAMS_STEPS)])

    def advance(
        self, n: int, adapt_step: bool, depth: int, phase: str, total: int
    ) -> Iterator[Transitions]:
        """``n`` transitions per chain, in chunks; yields each chunk's transitions."""
        import jax

        left = n
        while left > 0:
            k = min(left, self.clock.chunk_length())
            tic = time.perf_counter()
            setting = self.steps_for(depth)
            self.state, out = self.sampler._compiled(
                self.state, self.inv_mass, k, adapt_step, setting, *self.data
            )
            self.state = jax.tree.map(np.asarray, self.state)
            out = Transitions(*(np.asarray(o)[:, :k] for o in out))
            elapsed = time.perf_counter() - tic
            self.in_chunks += elapsed
            self.clock.record(k, elapsed)
            left -= k
            self.work.done += k
            yield out
            self.progress.update(
                phase, self.work.phase_done(phase), total, self.work.fraction, self.divergences
            )

    def warm_up(self, tune: int, probes: int) -> np.ndarray:
        """Windows of step-size and mass adaptation (and, for MAMS, trajectory length), then
        ``probes`` probes correcting the step size; the integration steps per chain."""
        import jax

        chains, warmup = self.sampler.chains, self.warmup
        warmup_steps = np.zeros(chains)
        windows = adapt.windows(tune)
        for w, n in enumerate(windows):
            zs, gs, travelled = [], [], []
            for out in self.advance(n, True, adapt.depth_cap(w), "warm-up", warmup):
                warmup_steps += out.steps.sum(axis=1)
                zs.append(out.z)
                gs.append(out.grad)
                travelled.append(out.step_size * out.steps)
            if self.mams and 1 < w < len(windows) - 1:
                self.length = adapt.trajectory_length(
                    np.concatenate(zs, axis=1), float(np.mean(np.concatenate(travelled, axis=1)))
                )
            if w < len(windows) - 1:  # the last window tunes the step size only
                draws_w, grads_w = np.concatenate(zs, axis=1), np.concatenate(gs, axis=1)
                if w == 0:  # the first window's first half is still burning in
                    draws_w, grads_w = (
                        draws_w[:, draws_w.shape[1] // 2 :],
                        grads_w[:, grads_w.shape[1] // 2 :],
                    )
                self.inv_mass = adapt.pooled_inv_mass(draws_w, grads_w)
            # restart the step size's dual averaging around its current average
            self.state = self.state._replace(step=step_size_state(np.exp(self.state.step[1])))
        # every chain samples with the smallest adapted step size: one chain's luckier
        # adaptation must not be the one that diverges
        step = float(np.exp(np.min(self.state.step[1]))) if windows else INITIAL_STEP
        self.state = self.state._replace(step=step_size_state(np.full(chains, step)))
        self.state = jax.tree.map(np.asarray, self.state)
        for _ in range(probes):
            # dual averaging on single trajectories' acceptance is biased: the averaged step
            # size accepts more often than the target. Measure it at that fixed step size and
            # rescale (adapt.step_correction); a second probe corrects what the first missed
            accepts = []
            for out in self.advance(PROBE, False, MAX_TREE_DEPTH, "warm-up", warmup):
                warmup_steps += out.steps.sum(axis=1)
                accepts.append(out.accept)
            accept = float(np.mean(np.concatenate(accepts, axis=1)))
            step *= adapt.step_correction(accept, self.sampler.target_accept)
            self.state = self.state._replace(step=step_size_state(np.full(chains, step)))
            self.state = jax.tree.map(np.asarray, self.state)
        return warmup_steps

    def sample(
        self, settings: RunSettings
    ) -> tuple[list[Transitions], int, list[str], Convergence | None]:
        """``settings.draws`` draws per chain, extended until the ESS target and R-hat are met
        (or ``max_draws``); the chunks kept, the extensions, notes and the last check (made
        on exactly the draws kept, else ``None``)."""
        sampler = self.sampler
        goal, extensions, drawn = settings.draws, 0, 0
        kept: list[Transitions] = []
        notes: list[str] = []
        check: Convergence | None = None
        while True:
            for out in self.advance(goal - drawn, False, MAX_TREE_DEPTH, "sampling", goal):
                kept.append(out)
                self.divergences += int(out.diverging.sum())
            drawn, check = goal, None
            if settings.ess_target <= 0 or goal >= settings.max_draws:
                break
            check = convergence(
                sampler.derive(np.concatenate([o.z for o in kept], axis=1)), sampler.density.dims
            )
            worst = min(check.min_ess_bulk, check.min_ess_tail)
            if worst >= settings.ess_target and check.max_rhat <= RHAT_MAX:
                break
            if not np.isfinite(worst):
                notes.append(f"ESS is not finite for {check.worst_ess}: not extending")
                break
            wanted = math.ceil(goal * settings.ess_target * ESS_MARGIN / max(worst, 1.0))
            goal = int(
                min(settings.max_draws, max(goal + MIN_EXTENSION, min(wanted, MAX_GROWTH * goal)))
            )
            self.work.total = self.warmup + goal
            extensions += 1
        return kept, extensions, notes, check


class _Work:
    """Transitions per chain done and planned (warm-up then sampling), for the bar."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.tune_done = total, 0, 0

    @property
    def fraction(self) -> float:
        return min(self.done / max(self.total, 1), 1.0)

    def phase_done(self, phase: str) -> int:
        if phase == "warm-up":
            self.tune_done = self.done
            return self.done
        return self.done - self.tune_done


class _Clock:
    """Chunk lengths that take about ``CHUNK_SECONDS`` at the last measured pace."""

    def __init__(self) -> None:
        self.seconds_per_transition: float | None = None

    def chunk_length(self) -> int:
        if self.seconds_per_transition is None:
            return 4
        return int(np.clip(CHUNK_SECONDS / max(self.seconds_per_transition, 1e-6), 1, CAPACITY))

    def record(self, n: int, seconds: float) -> None:
        pace = seconds / max(n, 1)
        old = self.seconds_per_transition
        self.seconds_per_transition = pace if old is None else 0.5 * old + 0.5 * pace
