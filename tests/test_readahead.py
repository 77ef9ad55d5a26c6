"""read_ahead: items read on their own thread, a pause that hands nothing out, and the
items read but never handed out given back, in order, when the consumer stops."""

import itertools
import threading
import time

import pytest

from aare_lab.runtime.readahead import read_ahead


class Counting:
    """An endless generator of 0, 1, 2, ... that records whether it was closed."""

    def __init__(self):
        self.closed = threading.Event()
        self._gen = self._run()

    def _run(self):
        try:
            yield from itertools.count()
        finally:
            self.closed.set()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def close(self):
        self._gen.close()


def test_a_stop_gives_back_what_was_read_but_not_handed_out_in_order():
    stop, given_back = threading.Event(), []
    items = Counting()
    taken = []
    for item in read_ahead(items, stop, depth=2, unread=given_back.extend):
        taken.append(item)
        if len(taken) == 3:
            time.sleep(0.3)   # the reader fills the queue (2) and holds one more
            stop.set()
    assert taken == [0, 1, 2]
    assert given_back == [3, 4, 5]
    assert items.closed.wait(5)


def test_without_unread_a_stop_just_ends_the_iteration():
    stop = threading.Event()
    items = Counting()
    for item in read_ahead(items, stop):
        if item == 4:
            stop.set()
    assert items.closed.wait(5)


def test_nothing_is_handed_out_while_held():
    stop, hold = threading.Event(), threading.Event()
    hold.set()
    got = []

    def consume():
        for item in read_ahead(Counting(), stop, hold=hold):
            got.append(item)
            if len(got) == 5:
                stop.set()

    consumer = threading.Thread(target=consume)
    consumer.start()
    time.sleep(0.5)
    assert got == []
    hold.clear()
    consumer.join(10)
    assert got == [0, 1, 2, 3, 4]


def test_a_stop_while_held_gives_everything_back():
    stop, hold, given_back = threading.Event(), threading.Event(), []
    hold.set()
    result = []
    consumer = threading.Thread(target=lambda: result.extend(
        read_ahead(Counting(), stop, depth=3, hold=hold, unread=given_back.extend)))
    consumer.start()
    time.sleep(0.3)
    stop.set()
    consumer.join(10)
    assert result == []
    assert given_back == [0, 1, 2, 3]   # three waiting, one held by the reader


def test_an_error_of_the_reader_is_raised_to_the_consumer():
    def failing():
        yield 1
        raise OSError("the disk went away")

    got = []
    with pytest.raises(OSError, match="disk went away"):
        for item in read_ahead(failing(), threading.Event()):
            got.append(item)
    assert got == [1]


def test_leaving_early_stops_the_reading_and_gives_back_the_rest():
    stop, given_back = threading.Event(), []
    items = Counting()
    for item in read_ahead(items, stop, depth=2, unread=given_back.extend):
        if item == 1:
            time.sleep(0.3)
            break
    assert stop.is_set() and items.closed.wait(5)
    assert given_back == [2, 3, 4]


def test_an_error_of_the_consumer_gives_back_the_rest():
    stop, given_back = threading.Event(), []
    with pytest.raises(ZeroDivisionError):
        for item in read_ahead(Counting(), stop, depth=2, unread=given_back.extend):
            if item == 2:
                time.sleep(0.3)
                raise ZeroDivisionError
    assert stop.is_set() and given_back == [3, 4, 5]


def test_the_end_of_the_items_gives_nothing_back():
    stop, calls = threading.Event(), []
    assert list(read_ahead((i for i in range(5)), stop, unread=calls.append)) == [0, 1, 2, 3, 4]
    assert calls == [] and not stop.is_set()
