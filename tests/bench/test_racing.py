"""benchmarks.racing: the racing rule replayed on hand-made trajectories (hand-computed outcomes)."""

from benchmarks import halving, racing
from jaxclp.gnn import HALVING_RUNGS


def _spec(j, vals, seconds, num_val=10, stopped_at=None):
    """One spec's trajectory: best validation score and seconds so far at epochs 50, 100, 200 and the end (500)."""
    points = [dict(until=u, epoch=u, val=v, loss=1.0 - v, stopped=stopped_at is not None and u >= stopped_at,
                   seconds=s, test=v / 2) for u, v, s in zip((50, 100, 200, 500), vals, seconds)]
    return dict(graph="g", split=0, conv="gcn", spec=j, points=points, num_val=num_val)


def test_racing_stops_the_specs_below_the_floor_at_the_first_race_point():
    specs = [_spec(0, (0.5, 0.6, 0.7, 0.9), (1, 2, 4, 10)), _spec(1, (0.3, 0.3, 0.3, 0.35), (1, 2, 4, 10))]
    # no halving on 10 validation nodes; spec 1 (0.3 < 0.45) stops at epoch 50, spec 0 trains to the end
    got = racing.replay(specs, floor=0.45, race=(50, 100, 200))
    assert (got["spec"], got["val"], got["test"], got["seconds"], got["epochs"]) == (0, 0.9, 0.45, 11, 550)
    # a floor above every spec at epoch 50 stops the whole grid there; the best spec so far is spec 0
    got = racing.replay(specs, floor=0.8, race=(50, 100, 200))
    assert (got["spec"], got["val"], got["seconds"], got["epochs"]) == (0, 0.5, 2, 100)
    # race points after 50 only: spec 0 (0.6 < 0.65 at 100) stops at 100, spec 1 too
    got = racing.replay(specs, floor=0.65, race=(100, 200))
    assert (got["spec"], got["val"], got["seconds"], got["epochs"]) == (0, 0.6, 4, 200)


def test_without_a_floor_the_replay_is_todays_gated_halving():
    specs = [_spec(j, (0.1 * j, 0.1 * j + 0.01, 0.1 * j + 0.02, 0.1 * j + 0.03), (1, 2, 4, 10)) for j in range(4)]
    assert racing.replay(specs, None, (50, 100, 200)) == halving.replay(specs, ())  # 10 validation nodes: no halving
    big = [dict(s, num_val=1000) for s in specs]
    assert racing.replay(big, None, (50,)) == halving.replay(big, HALVING_RUNGS)
    # at 50 halving keeps specs 2 and 3, then racing drops spec 2 (0.2 < 0.25): one epoch-50 chunk saved
    assert halving.replay(big, HALVING_RUNGS)["seconds"] == 1 + 1 + 2 + 10
    got = racing.replay(big, floor=0.25, race=(50,))
    assert (got["spec"], got["seconds"]) == (3, 1 + 1 + 1 + 10)
    # racing only removes what halving keeps: of 5 specs halving keeps 3 at 50 (2, 3, 4), all above 0.05; racing
    # first would have dropped spec 0 and let halving keep 2 of the 4 left
    five = [dict(_spec(j, (0.1 * j, 0.1 * j + 0.01, 0.1 * j + 0.02, 0.1 * j + 0.03), (1, 2, 4, 10)), num_val=1000)
            for j in range(5)]
    assert racing.replay(five, floor=0.05, race=(50,)) == halving.replay(five, HALVING_RUNGS)


def test_oracle_counts_only_the_grids_that_end_below_the_incumbent():
    rows = [dict(graph="g", split=1, today={"seconds": 10.0}, oracle_seconds=4.0),
            dict(graph="g", split=0, today={"seconds": 99.0}, oracle_seconds=0.0)]  # split 0: compilation, left out
    got = racing.oracle(rows)
    assert abs(got["saving"] - 0.6) < 1e-12 and abs(got["per_graph"]["g"] - 0.6) < 1e-12
