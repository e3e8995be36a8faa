"""The run book's figures (attempts per unit, actors alive, restarts), on its own clock: the
class is plain Python, Ray only hosts it."""

from __future__ import annotations

from hpdparse.runner.ray.run_book import HEARTBEAT_SECONDS, MISSED_BEATS, ActorCount, RunBook
from tests.helpers.clock import FakeClock


def test_attempts_are_counted_per_unit() -> None:
    book = RunBook()
    assert [book.begin(7), book.begin(7), book.begin(8)] == [1, 2, 1]


def test_an_actor_that_stops_beating_is_no_longer_alive() -> None:
    clock = FakeClock()
    book = RunBook(clock)
    assert book.actors() == ActorCount(alive=0, restarts=0)
    book.beat("a", 100)
    book.beat("b", 200)
    assert book.actors() == ActorCount(alive=2, restarts=0)
    window = HEARTBEAT_SECONDS * MISSED_BEATS
    clock.now = window - 0.5
    book.beat("a", 100)  # b's process died: it beats no more
    clock.now = window + 0.5
    assert book.actors() == ActorCount(alive=1, restarts=0)


def test_a_beat_from_a_new_process_of_an_actor_is_a_restart() -> None:
    clock = FakeClock()
    book = RunBook(clock)
    book.beat("a", 100)
    book.beat("b", 200)
    clock.now = 1.0
    book.beat("b", 201)  # Ray restarted actor b in a new process
    book.beat("b", 201)
    assert book.actors() == ActorCount(alive=2, restarts=1)


def test_an_actor_let_go_is_done_not_dead_and_a_late_beat_does_not_revive_it() -> None:
    clock = FakeClock()
    book = RunBook(clock)
    book.beat("a", 100)
    book.beat("b", 200)
    book.leave("a", 100)
    book.beat("a", 100)  # sent by its heartbeat thread just before the goodbye
    assert book.actors() == ActorCount(alive=1, restarts=0, done=1)
    clock.now = 100.0  # long after: b died, a is still done
    assert book.actors() == ActorCount(alive=0, restarts=0, done=1)
    book.beat("a", 101)  # Ray started actor a again, in a new process
    assert book.actors() == ActorCount(alive=1, restarts=1, done=0)
