"""StreamSource and StreamPublisher over real ZeroMQ sockets on 127.0.0.1 (no receiver).

Every socket binds port 0 (a free port) and every wait is bounded.
"""

import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest
import zmq

from aare_lab.simulate import Detector, Simulator
from aare_lab.sources import StreamSource, StreamTimeout
from aare_lab.sources.sls_header import END_HEADER, format_header, parse_message
from aare_lab.stream.publisher import StreamPublisher

SHAPE = (8, 12)
#: The header the README of shared/tools/slsdet shows, as the real 9.2.0 receiver sent it.
README_HEADER = (
    b'{"jsonversion":5, "bitmode":16, "fileIndex":0, "detshape":[1, 1], "shape":[400, 400], '
    b'"size":320000, "acqIndex":1, "frameIndex":0, "progress":0.5, "fname":"//run", "data":1, '
    b'"completeImage":1, "frameNumber":1, "expLength":0, "packetNumber":50, "detSpec1":0, '
    b'"timestamp":0, "modId":1234, "row":0, "column":0, "detSpec2":0, "detSpec3":0, '
    b'"detSpec4":0, "detType":5, "version":2, "flipRows":0, "quad":0, '
    b'"rx_roi":[0, 399, 0, 399]}\n')


def frames_of(n, shape=SHAPE, seed=0):
    return np.random.default_rng(seed).integers(0, 4000, (n, *shape), dtype=np.uint16)


def collect(source, with_headers=False):
    chunks = list(source.chunks(with_headers=with_headers))
    if with_headers:
        chunks, headers = zip(*chunks) if chunks else ((), ())
        return (np.concatenate([c.numbers for c in chunks]),
                np.concatenate([c.frames for c in chunks]), [h for part in headers for h in part])
    if not chunks:
        return np.zeros(0, np.int64), np.zeros((0, *SHAPE), np.uint16)
    return np.concatenate([c.numbers for c in chunks]), np.concatenate([c.frames for c in chunks])


class RawPub:
    """A bare PUB socket, for messages the publisher would never send."""

    def __init__(self, n=1):
        self.context = zmq.Context()
        self.sockets = [self.context.socket(zmq.XPUB) for _ in range(n)]
        self.endpoints = []
        for socket in self.sockets:
            socket.setsockopt(zmq.XPUB_VERBOSE, 1)  # every subscriber's subscription
            socket.bind("tcp://127.0.0.1:0")
            self.endpoints.append(socket.getsockopt(zmq.LAST_ENDPOINT).decode())

    def wait(self):
        for socket in self.sockets:
            assert socket.poll(5000), "no subscriber"
            socket.recv()

    def part(self, number, image, *, socket=0, rows=1, row=0, complete=True, frame_index=None,
             **header):
        text = format_header(frame_number=number,
                             frame_index=number - 1 if frame_index is None else frame_index,
                             shape=image.shape, detshape=(rows, 1), row=row,
                             complete=complete, **header)
        self.sockets[socket].send_multipart([text, image])

    def send(self, *parts, socket=0):
        self.sockets[socket].send_multipart(list(parts))

    def end(self, socket=0):
        self.sockets[socket].send(END_HEADER)

    def close(self):
        for socket in self.sockets:
            socket.close(linger=0)
        self.context.term()


@pytest.fixture
def raw():
    pub = RawPub()
    yield pub
    pub.close()


@pytest.fixture
def raw2():
    pub = RawPub(2)
    yield pub
    pub.close()


def test_the_receivers_header_and_end_message_parse():
    image = np.arange(400 * 400, dtype="<u2").tobytes()
    part = parse_message([README_HEADER, image])
    assert part.number == 1 and part.position == (0, 0) and part.complete
    assert part.image.shape == (400, 400) and part.image[1, 0] == 400
    assert part.header["modId"] == 1234
    assert parse_message([END_HEADER]) is None
    # jsonversion 4 (slsDetectorPackage 6.x) names detSpec1..4 differently, has no rx_roi
    v4 = (README_HEADER.replace(b'"jsonversion":5', b'"jsonversion":4')
          .replace(b'"detSpec1"', b'"bunchId"').replace(b'"detSpec2"', b'"reserved"')
          .replace(b'"detSpec3"', b'"debug"').replace(b'"detSpec4"', b'"roundRNumber"')
          .replace(b', "rx_roi":[0, 399, 0, 399]', b''))
    assert parse_message([v4, image]).header["bunchId"] == 0
    # The writer gives the same bytes as the receiver for the same values.
    assert format_header(frame_number=1, frame_index=0, shape=(400, 400), progress=0.5,
                         packets=50, mod_id=1234) == README_HEADER


def test_published_frames_arrive_identical_with_headers():
    frames = frames_of(150)
    with StreamPublisher("tcp://127.0.0.1:0", total_frames=150) as pub, \
            StreamSource(pub.endpoints, chunk_frames=64) as source:
        pub.wait_for_subscribers()
        pub.send_frames(frames)
        pub.end_acquisition()
        numbers, got, headers = collect(source, with_headers=True)
        assert source.frame_shape == SHAPE
        stats = source.stats
    assert numbers.tolist() == list(range(1, 151))
    assert numbers.dtype == np.int64 and got.dtype == np.uint16
    np.testing.assert_array_equal(got, frames)
    assert [h[0]["frameNumber"] for h in headers] == list(range(1, 151))
    assert headers[-1][0]["progress"] == 100
    assert stats.as_dict() == dict(frames_received=150, frames_processed=0, frames_lost=0,
                                   frames_incomplete=0, frames_dropped=0, frames_queued=150,
                                   messages_malformed=0)
    assert (stats.frames_yielded, stats.acquisitions, stats.acquisitions_ended) == (150, 1, 1)


def test_chunks_given_back_come_first_and_until_lets_go_of_the_stream():
    frames = frames_of(40)
    with StreamPublisher("tcp://127.0.0.1:0") as pub, \
            StreamSource(pub.endpoints, chunk_frames=8) as source:
        pub.wait_for_subscribers()
        pub.send_frames(frames)
        pub.end_acquisition()
        until = threading.Event()
        first = source.chunks(until=until)
        taken = [next(first), next(first)]
        until.set()
        t0 = time.monotonic()
        assert list(first) == []   # takes nothing more once set
        assert time.monotonic() - t0 < 1
        assert source.stats.frames_yielded == 16
        source.unread(taken[1:])
        source.unread(taken[:1])   # given back later, yet older: it goes in front
        assert source.stats.frames_yielded == 0
        numbers, got = collect(source)
        stats = source.stats
    assert numbers.tolist() == list(range(1, 41))
    np.testing.assert_array_equal(got, frames)
    assert (stats.frames_received, stats.frames_yielded, stats.frames_dropped) == (40, 40, 0)


def test_an_acquisitions_end_read_after_the_chunks_given_back_goes_back_too():
    with StreamPublisher("tcp://127.0.0.1:0") as pub, \
            StreamSource(pub.endpoints, chunk_frames=8, receive_timeout=5) as source:
        pub.wait_for_subscribers()
        pub.send_frames(frames_of(16))
        pub.end_acquisition()
        taken = list(source.chunks())   # both chunks, then the end: the iteration stops
        source.unread(taken)
        t0 = time.monotonic()
        again = list(source.chunks())
        waited = time.monotonic() - t0
    assert [c.numbers.tolist() for c in again] == [c.numbers.tolist() for c in taken]
    assert waited < 2, f"the iteration waited {waited:.1f} s instead of ending at the end"


def test_chunks_given_back_keep_their_headers():
    with StreamPublisher("tcp://127.0.0.1:0") as pub, \
            StreamSource(pub.endpoints, chunk_frames=4) as source:
        pub.wait_for_subscribers()
        pub.send_frames(frames_of(8))
        pub.end_acquisition()
        iterator = source.chunks(with_headers=True)
        pair = next(iterator)
        iterator.close()
        source.unread([pair])
        numbers, _, headers = collect(source, with_headers=True)
    assert numbers.tolist() == list(range(1, 9))
    assert [h[0]["frameNumber"] for h in headers] == list(range(1, 9))


def test_two_interfaces_are_assembled_by_row():
    frames = frames_of(40)
    with StreamPublisher("tcp://127.0.0.1:0", interfaces=2) as pub, \
            StreamSource(pub.endpoints, chunk_frames=16) as source:
        pub.wait_for_subscribers()
        pub.send_frames(frames)
        pub.end_acquisition()
        _, got, headers = collect(source, with_headers=True)
    np.testing.assert_array_equal(got, frames)
    assert [(h["row"], h["detshape"]) for h in headers[0]] == [(0, [1, 2]), (1, [1, 2])]


def test_bad_messages_are_counted_and_skipped(raw):
    good = frames_of(3)
    with StreamSource(raw.endpoints, chunk_frames=8) as source:
        raw.wait()
        raw.part(1, good[0])
        header = format_header(frame_number=2, frame_index=1, shape=SHAPE)
        bad = [
            [b"{not json", good[1]],                                   # malformed JSON
            [header[:40], good[1]],                                    # truncated header
            [header],                                                  # no data part
            [header, good[1][:4]],                                     # data part too short
            [header, good[1], good[1]],                                # one part too many
            [header.replace(b'"bitmode":16', b'"bitmode":32'), good[1]],
            [header.replace(b'"jsonversion":5', b'"jsonversion":3'), good[1]],
            [header.replace(b'"detType":5', b'"detType":3'), good[1]],  # another detector
            [format_header(frame_number=2, frame_index=1, shape=(4, 6)),
             good[1][:4, :6].copy()],                                  # another shape
            [header.replace(b'"frameNumber":2', b'"frameNumber":-2'), good[1]],
            [b"[1, 2]", good[1]],
        ]
        for message in bad:
            raw.send(*message)
        raw.part(2, good[1])
        raw.part(3, good[2])
        raw.end()
        numbers, got = collect(source)
        stats = source.stats
    assert numbers.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(got, good)
    assert stats.messages_malformed == len(bad)
    # Each refusal by its kind; the other detector and shape are stray formats: frames of
    # the stream's format came back after each.
    assert stats.refused == {"not_json": 3, "header": 1, "size": 3, "bitmode": 1,
                             "version": 1, "format": 2}
    assert sum(stats.refused.values()) == stats.messages_malformed
    assert "not a JSON object" in stats.last_malformed
    assert (stats.frames_received, stats.frames_lost) == (3, 0)


def test_stray_frames_of_another_format_before_a_run_do_not_lock_the_stream(raw):
    """Three frames of another shape, then three of another detector type, then the run:
    the run's format is the stream's, the strays are refused and counted as such."""
    frames = frames_of(20)
    with StreamSource(raw.endpoints, chunk_frames=8, receive_timeout=5) as source:
        raw.wait()
        for number in (1, 2, 3):
            raw.part(number, frames_of(1, (4, 6), seed=number)[0])
        for number in (1, 2, 3):
            raw.part(number, frames[number], det_type=3)
        for number in range(1, 21):
            raw.part(number, frames[number - 1])
        raw.end()
        numbers, got = collect(source)
        stats = source.stats
        assert source.frame_shape == SHAPE
    assert numbers.tolist() == list(range(1, 21))
    np.testing.assert_array_equal(got, frames)
    assert stats.refused == {"format": 6} and stats.messages_malformed == 6
    assert "detType 3 frames of 8x12 pixels" in stats.last_malformed
    assert (stats.frames_received, stats.frames_lost, stats.acquisitions_ended) == (20, 0, 1)


def test_a_stray_frame_within_a_run_is_refused_and_the_run_goes_on(raw):
    frames = frames_of(20)
    with StreamSource(raw.endpoints, chunk_frames=8, receive_timeout=5) as source:
        raw.wait()
        for number in range(1, 21):
            raw.part(number, frames[number - 1])
            if number == 12:
                raw.part(1, frames_of(1, (4, 6))[0])
        raw.end()
        numbers, got = collect(source)
        stats = source.stats
    assert numbers.tolist() == list(range(1, 21))
    np.testing.assert_array_equal(got, frames)
    assert stats.refused == {"format": 1}
    assert (stats.frames_received, stats.frames_lost, stats.frames_incomplete) == (20, 0, 0)


def test_frames_of_another_shape_than_the_one_asked_for_are_refused(raw):
    frames = frames_of(4)
    with StreamSource(raw.endpoints, frame_shape=SHAPE, receive_timeout=5) as source:
        raw.wait()
        for number in (1, 2):
            raw.part(number, frames_of(1, (4, 6))[0])
        raw.end()
        for number in (1, 2, 3, 4):
            raw.part(number, frames[number - 1])
        raw.end()
        numbers, _ = collect(source)  # the refused acquisition's end ends no iteration
        stats = source.stats
    assert numbers.tolist() == [1, 2, 3, 4]
    assert stats.refused == {"format": 2} and stats.acquisitions_ended == 1
    assert "not the 8x12 pixels asked for" in stats.last_malformed


def test_frames_sent_after_the_last_one_received_are_lost_where_progress_tells(raw):
    """The receiver writes progress = 100 (frameIndex + 1) / frames of the acquisition:
    frames never received after the last one are lost, counted at the end of the
    acquisition or at the start of the next; and after an end, frames before the next
    acquisition's first are lost too."""
    frames = frames_of(10)

    def acquisition(numbers, total, first=1):
        for number in numbers:
            raw.part(number, frames[0], frame_index=number - first,
                     progress=100 * (number - first + 1) / total)

    with StreamSource(raw.endpoints, stop_at_end=False, receive_timeout=1) as source:
        raw.wait()
        acquisition(range(1, 11), total=14)       # 4 lost at the tail, then the end
        raw.end()
        acquisition(range(1, 6), total=8)         # 3 lost at the tail, no end message:
        acquisition(range(1, 7), total=6)         # numbering restarts, the next one
        raw.end()
        acquisition(range(3, 10), total=9)        # its first two frames never came
        raw.end()
        numbers, _ = collect(source)
        stats = source.stats
    assert numbers.size == 10 + 5 + 6 + 7
    assert (stats.frames_lost, stats.acquisitions, stats.acquisitions_ended) == (4 + 3 + 2, 4, 3)
    assert stats.frames_received + stats.frames_lost == 14 + 8 + 6 + 9


def test_gaps_are_lost_frames_and_padded_frames_incomplete(raw):
    frames = frames_of(7)
    padded = frames[3].copy()
    padded[2:4] = 0xFFFF  # what the receiver writes for a missing packet
    with StreamSource(raw.endpoints) as skip, \
            StreamSource(raw.endpoints, incomplete="mask") as mask:
        raw.wait()
        raw.wait()
        for number in (1, 2, 3, 5, 6):
            raw.part(number, frames[number])
        raw.end()
        raw.part(1, frames[1])
        raw.part(2, padded, complete=False)
        raw.part(4, frames[4])
        raw.end()
        first = [collect(s) for s in (skip, mask)]
        second = [collect(s) for s in (skip, mask)]
        stats = skip.stats, mask.stats
    for numbers, _ in first:
        assert numbers.tolist() == [1, 2, 3, 5, 6]
    assert second[0][0].tolist() == [1, 4]
    assert second[1][0].tolist() == [1, 2, 4]
    masked = second[1][1][1]
    np.testing.assert_array_equal(masked[2:4], 0)
    np.testing.assert_array_equal(masked[:2], frames[3][:2])
    np.testing.assert_array_equal(masked[4:], frames[3][4:])
    for s in stats:
        # frame 4 of the first acquisition and 3 of the second never came
        assert (s.frames_lost, s.frames_incomplete, s.frames_received) == (2, 1, 8)
        assert (s.acquisitions, s.acquisitions_ended) == (2, 2)


def test_a_missing_part_is_given_up_when_the_other_socket_moves_on():
    frames = frames_of(4, (8, 12))
    pub = RawPub(2)
    try:
        with StreamSource(pub.endpoints, assemble_timeout=30) as source:
            pub.wait()
            started = time.monotonic()
            for number in (1, 2, 3):
                for row in (0, 1):
                    if (number, row) != (2, 1):
                        pub.part(number, frames[number, row * 4:(row + 1) * 4], socket=row,
                                 rows=2, row=row)
            pub.end(0)
            pub.end(1)
            numbers, got = collect(source)
            elapsed = time.monotonic() - started
            stats = source.stats
    finally:
        pub.close()
    assert numbers.tolist() == [1, 3]
    np.testing.assert_array_equal(got, frames[[1, 3]])
    assert (stats.frames_incomplete, stats.frames_lost) == (1, 0)
    assert elapsed < 5  # far below assemble_timeout: no waiting for what cannot come


def test_a_silent_socket_costs_one_timeout_and_is_masked():
    frames = frames_of(3)
    pub = RawPub(2)
    try:
        with StreamSource(pub.endpoints, assemble_timeout=0.3, incomplete="mask") as source:
            pub.wait()
            for number in (1, 2):
                pub.part(number, frames[number, :4], rows=2)
            pub.end(0)
            numbers, got = collect(source)
            stats = source.stats
    finally:
        pub.close()
    assert numbers.tolist() == [1, 2]
    np.testing.assert_array_equal(got[:, :4], frames[1:, :4])
    np.testing.assert_array_equal(got[:, 4:], 0)
    assert (stats.frames_incomplete, stats.acquisitions_ended) == (2, 1)


def test_a_repeated_end_message_ends_the_acquisition_once():
    frames = frames_of(10)
    with StreamPublisher("tcp://127.0.0.1:0") as pub, \
            StreamSource(pub.endpoints, receive_timeout=1) as source:
        pub.wait_for_subscribers()
        pub.send_frames(frames[:5])
        for _ in range(3):
            pub.end_acquisition()
        pub.send_frames(frames[5:])
        pub.end_acquisition()
        pub.end_acquisition()
        first = collect(source)
        second = collect(source)
        third = collect(source)  # nothing more: ends after receive_timeout
        stats = source.stats
    assert first[0].tolist() == [1, 2, 3, 4, 5]
    assert second[0].tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(second[1], frames[5:])
    assert third[0].size == 0
    assert (stats.acquisitions, stats.acquisitions_ended, stats.end_messages) == (2, 2, 5)
    assert stats.frames_lost == 0


def test_a_socket_read_ahead_into_the_next_acquisition_does_not_end_it_for_the_others(raw2):
    # Port 0 sends all of acquisition A, its end and the start of B before port 1 sends
    # anything: B's parts must wait, so that A is assembled whole when port 1 catches up.
    a, b = frames_of(4, (8, 12), seed=1), frames_of(2, (8, 12), seed=2)
    with StreamSource(raw2.endpoints, assemble_timeout=3, receive_timeout=5) as source:
        raw2.wait()
        for frames in (a, b):
            for number, frame in enumerate(frames, 1):
                raw2.part(number, frame[:4], socket=0, rows=2, row=0)
            raw2.end(socket=0)
        time.sleep(0.3)  # the reader has long drained port 0 by now
        for frames in (a, b):
            for number, frame in enumerate(frames, 1):
                raw2.part(number, frame[4:], socket=1, rows=2, row=1)
            raw2.end(socket=1)
        first, second = collect(source), collect(source)
        stats = source.stats
    np.testing.assert_array_equal(first[1], a)
    np.testing.assert_array_equal(second[1], b)
    assert (stats.acquisitions, stats.acquisitions_ended, stats.frames_incomplete) == (2, 2, 0)


def test_a_repeated_part_is_malformed_not_a_new_acquisition(raw):
    frames = frames_of(3)
    with StreamSource(raw.endpoints, receive_timeout=2) as source:
        raw.wait()
        raw.part(1, frames[0])
        raw.part(2, frames[1])
        raw.part(2, frames[1])
        raw.part(3, frames[2])
        raw.end()
        numbers, got = collect(source)
        stats = source.stats
    assert numbers.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(got, frames)
    # the copy is dropped, whether as malformed or as late: it neither restarts the
    # acquisition nor makes frames incomplete
    assert (stats.acquisitions, stats.frames_received, stats.frames_incomplete) == (1, 3, 0)


def test_a_restarted_publisher_is_a_new_acquisition_not_lost_frames():
    frames = frames_of(30)
    with StreamPublisher("tcp://127.0.0.1:0") as pub:
        endpoint = pub.endpoints[0]
        source = StreamSource(endpoint)
        pub.wait_for_subscribers()
        pub.send_frames(frames[:20], numbers=range(1001, 1021))
    # gone without an end message; the same port comes back, numbering from 1
    with source, StreamPublisher(endpoint) as again:
        again.wait_for_subscribers()
        again.send_frames(frames[20:])
        again.end_acquisition()
        numbers, got = collect(source)
        stats = source.stats
    assert numbers.tolist() == [*range(1001, 1021), *range(1, 11)]
    np.testing.assert_array_equal(got, frames)
    assert (stats.frames_lost, stats.acquisitions, stats.acquisitions_ended) == (0, 2, 1)


def test_a_slow_consumer_drops_whole_chunks_with_bounded_memory():
    shape = (100, 100)
    frames = frames_of(50, shape)
    sent = 3000
    with StreamPublisher("tcp://127.0.0.1:0", hwm=10**6) as pub, \
            StreamSource(pub.endpoints, chunk_frames=16, queue_chunks=4) as source:
        pub.wait_for_subscribers()
        pub.start(frames, 3000, n_frames=sent)
        tracemalloc.start()
        numbers = []
        for chunk in source.chunks():
            numbers.append(chunk.numbers)
            time.sleep(0.1)  # a finder far slower than the stream
            source.mark_processed(len(chunk.numbers))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        stats = source.stats
    numbers = np.concatenate(numbers)
    assert (np.diff(numbers) > 0).all()
    assert stats.frames_dropped > sent / 2
    assert stats.frames_received + stats.frames_lost == sent
    assert stats.frames_yielded + stats.frames_dropped == stats.frames_received
    assert stats.frames_processed == stats.frames_yielded == numbers.size
    # 60 MB went through; what was held at once is a few chunks of 16 frames (20 kB each)
    assert peak < 4e6, peak


def test_a_flood_counts_every_frame_sent_as_received_or_lost():
    """Frames sent faster than they are read: ZeroMQ drops them at its high-water mark,
    the end message too maybe, and the last ones; the next acquisition's start (or the
    end) tells the first one's size, so that every frame sent is received or lost."""
    frames = frames_of(50, (100, 100))
    sent = 20_000
    with StreamPublisher("tcp://127.0.0.1:0", hwm=16, total_frames=sent) as pub, \
            StreamSource(pub.endpoints, chunk_frames=16, queue_chunks=2, stop_at_end=False,
                         receive_timeout=1.5) as source:
        pub.wait_for_subscribers()
        pub.stream(frames, 1e9, n_frames=sent)   # as fast as it goes, then the end
        time.sleep(0.5)
        pub.total_frames = 5
        pub.send_frames(frames[:5])
        pub.end_acquisition()
        for _ in source.chunks():
            pass
        stats = source.stats
    assert stats.frames_received + stats.frames_lost == sent + 5
    assert stats.frames_received == stats.frames_queued + stats.frames_dropped
    assert stats.acquisitions == 2


def test_close_is_prompt_and_waiting_for_a_shape_times_out():
    with zmq.Context() as context, context.socket(zmq.PUB) as silent:
        silent.bind("tcp://127.0.0.1:0")
        endpoint = silent.getsockopt(zmq.LAST_ENDPOINT).decode()
        source = StreamSource(endpoint, receive_timeout=0.3)
        started = time.monotonic()
        with pytest.raises(StreamTimeout, match="no usable frame header"):
            _ = source.frame_shape
        assert list(source.chunks()) == []
        assert time.monotonic() - started < 3
        waiting = StreamSource(endpoint)
        done = threading.Event()
        threading.Thread(target=lambda: (list(waiting.chunks()), done.set()),
                         daemon=True).start()
        time.sleep(0.1)
        started = time.monotonic()
        waiting.close()
        assert done.wait(2) and time.monotonic() - started < 1
        source.close()
        source.close()
        with pytest.raises(ValueError, match="closed"):
            source.chunks()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="incomplete"):
        StreamSource("tcp://127.0.0.1:1", incomplete="pad")
    with pytest.raises(ValueError, match="endpoints"):
        StreamSource([])
    with pytest.raises(ValueError, match="cannot connect"):
        StreamSource("nonsense://x")
    with pytest.raises(ValueError, match="assemble_timeout"):
        StreamSource("tcp://127.0.0.1:1", assemble_timeout=0)


def test_stream_sim_sends_the_simulated_run_and_ends_it_on_ctrl_c():
    with zmq.Context() as context, context.socket(zmq.PUB) as probe:
        probe.bind("tcp://127.0.0.1:0")
        endpoint = probe.getsockopt(zmq.LAST_ENDPOINT).decode()
    # The subscriber connects first and retries until the publisher binds.
    source = StreamSource(endpoint, frame_shape=(400, 400), receive_timeout=60)
    process = subprocess.Popen(
        [sys.executable, "-m", "aare_lab.cli", "stream-sim", "--endpoint", endpoint,
         "--frames", "1000", "--n-dark", "4", "--bank", "6", "--rate", "25", "--seed", "3"],
        stdout=subprocess.PIPE, text=True)
    chunks = []
    try:
        with source:
            for chunk in source.chunks(with_headers=True):
                chunks.append(chunk)
                if sum(len(c.numbers) for c, _ in chunks) >= 12 and process.poll() is None:
                    process.send_signal(signal.SIGINT)
            stats = source.stats
    finally:
        out = process.communicate(timeout=60)[0]
    assert process.returncode == 0, out
    assert "publishing on" in out and "stopped:" in out
    assert stats.acquisitions_ended == 1  # the end message came after Ctrl-C
    numbers = np.concatenate([c.numbers for c, _ in chunks])
    assert 12 <= numbers.size < 1004
    # The first frames may go out before the subscription reaches the publisher.
    assert numbers.tolist() == list(range(numbers[0], numbers[-1] + 1))
    sim = Simulator(Detector(frame_shape=(400, 400)), seed=3)
    dark, data = sim.dark(4), sim.frames(6)[0]
    expected = [dark[n - 1] if n <= 4 else data[(n - 5) % 6] for n in numbers.tolist()]
    np.testing.assert_array_equal(np.concatenate([c.frames for c, _ in chunks]), expected)
    headers = [h for _, part in chunks for h in part]
    assert headers[0][0]["progress"] == pytest.approx(100 * numbers[0] / 1004, rel=1e-5)
    assert {h[0]["detType"] for h in headers} == {5}


def test_stream_sim_waits_for_its_subscriber_so_no_frame_is_missed():
    with zmq.Context() as context, context.socket(zmq.PUB) as probe:
        probe.bind("tcp://127.0.0.1:0")
        endpoint = probe.getsockopt(zmq.LAST_ENDPOINT).decode()
    process = subprocess.Popen(
        [sys.executable, "-m", "aare_lab.cli", "stream-sim", "--endpoint", endpoint,
         "--frames", "7", "--n-dark", "2", "--bank", "3", "--rate", "1000",
         "--wait-subscribers", "1"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().startswith("waiting for 1 subscriber(s) on ")
        time.sleep(1.0)   # longer than the slow-joiner pause: still nothing sent
        assert process.poll() is None
        with StreamSource(endpoint, frame_shape=(400, 400), receive_timeout=60) as source:
            numbers = [n for chunk in source.chunks() for n in chunk.numbers.tolist()]
    finally:
        out = process.communicate(timeout=60)[0]
    assert process.returncode == 0, out
    assert numbers == list(range(1, 10))   # from the very first frame


def test_stream_sim_gives_up_waiting_with_exit_1(capsys):
    from aare_lab.cli import main

    assert main(["stream-sim", "--endpoint", "tcp://127.0.0.1:0", "--frames", "1",
                 "--wait-subscribers", "1", "--wait-timeout", "0.3"]) == 1
    assert "0 of 1 subscribers" in capsys.readouterr().err
