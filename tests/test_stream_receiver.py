"""StreamSource on the real slsReceiver 9.2.0 (tests/slsdet.py starts it, on free ports).

Frames of our own go in as MÖNCH UDP packets, and the receiver streams them with its own
headers and end messages; a virtual MÖNCH server acquires through it too. Skipped, with
the reason, where the binaries are absent (CI requires them when AARE_LAB_SLSDET is set).
"""

import socket
import threading
import time
import warnings

import numpy as np
import pytest
import zmq
from slsdet import PACKET_DATA, Setup, binaries, send_frame

from aare_lab import FrozenFinder, train_pedestal
from aare_lab.simulate import Simulator
from aare_lab.sources import StreamSource
from aare_lab.sources.sls_header import END_HEADER, format_header

pytestmark = pytest.mark.slsdet

#: The virtual server's frames per acquisition, which the receiver's progress uses.
VIRTUAL_FRAMES = 20
#: Seconds for a subscriber to connect and subscribe before anything is sent.
JOIN = 0.5
N_DARK = 100


@pytest.fixture(scope="module")
def receivers(tmp_path_factory):
    """A one-interface receiver (default: partial frames discarded) and a two-interface
    one padding partial frames, started side by side."""
    bin_dir, why = binaries()
    if bin_dir is None:
        pytest.skip(why)
    setups, errors = {}, []
    # Made here, not on the threads: the first mktemp of a worker also creates pytest's
    # base folder, and two threads doing that at once collide (FileExistsError).
    folders = {key: tmp_path_factory.mktemp(key) for key in ("one", "two")}

    def start(key, **options):
        try:
            setups[key] = Setup(bin_dir, folders[key], **options)
        except Exception as err:  # raised below, on the test's thread
            errors.append(err)

    threads = [threading.Thread(target=start, args=("one",),
                                kwargs=dict(frames=VIRTUAL_FRAMES)),
               threading.Thread(target=start, args=("two",), kwargs=dict(
                   interfaces=2, extra=[("rx_discardpolicy", "nodiscard"),
                                        ("rx_padding", "1")]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        if errors:
            raise errors[0]
        yield setups
    finally:
        for setup in setups.values():
            setup.close()


@pytest.fixture(scope="module")
def sim():
    return Simulator(seed=5)


@pytest.fixture(scope="module")
def pedestal(sim):
    return train_pedestal(sim.dark(N_DARK), N_DARK, progress=False)


def find_live(pedestal, chunks):
    """Clusters of streamed chunks, chunk by chunk as a live consumer finds them."""
    finder = FrozenFinder(pedestal.copy(), n_sigma=5, cluster_size="3x3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the short dark run is on purpose
        return finder.assemble([finder.process_chunk(c.frames, c.numbers) for c in chunks])


def find_offline(pedestal, frames, numbers):
    finder = FrozenFinder(pedestal.copy(), n_sigma=5, cluster_size="3x3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return finder.find(frames, frame_numbers=numbers, progress=False)


def send_run(setup, parts, short=()):
    """``rx_start``, the UDP packets of ``parts`` ({number: [interface images]}), ``rx_stop``.

    ``short`` holds ``(number, interface)`` whose packet 3 is left out.
    """
    setup.put("rx_start")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        for number, images in parts.items():
            for interface, image in enumerate(images):
                send_frame(udp, setup.udp_ports[interface], image, number, row=interface,
                           skip_packets=(3,) if (number, interface) in short else ())
            time.sleep(0.002)  # the receiver's UDP buffer is the kernel default here
    time.sleep(0.2)
    setup.put("rx_stop")


def raw_subscriber(context, endpoint):
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.connect(endpoint)
    return sub


def drain(sub):
    messages = []
    while sub.poll(1000):
        messages.append(sub.recv_multipart())
        if messages[-1][0] == END_HEADER:
            return messages
    return messages


def test_a_simulated_run_through_the_receiver_gives_the_offline_clusters(receivers, sim,
                                                                         pedestal):
    setup = receivers["one"]
    frames, _ = sim.frames(24)
    numbers = np.arange(1, 25)
    with StreamSource(setup.endpoints, chunk_frames=8) as source, \
            zmq.Context() as context, raw_subscriber(context, setup.endpoints[0]) as sub:
        time.sleep(JOIN)
        # frame 7 loses a packet: 9.2.0 discards partial MÖNCH frames by default
        send_run(setup, {int(n): [f] for n, f in zip(numbers, frames)}, short={(7, 0)})
        chunks = list(source.chunks())
        stats = source.stats
        raw = drain(sub)
    kept = numbers != 7
    got = np.concatenate([c.numbers for c in chunks])
    assert got.tolist() == numbers[kept].tolist()
    np.testing.assert_array_equal(np.concatenate([c.frames for c in chunks]), frames[kept])
    assert (stats.frames_lost, stats.frames_incomplete, stats.messages_malformed,
            stats.acquisitions_ended) == (1, 0, 0, 1)

    live = find_live(pedestal, chunks)
    offline = find_offline(pedestal, frames[kept], numbers[kept])
    assert live.sizes["cluster"] > 1000
    for name in offline.data_vars:
        np.testing.assert_array_equal(live[name].values, offline[name].values, err_msg=name)

    # StreamPublisher writes what the receiver writes, byte for byte.
    assert raw[-1] == [END_HEADER]
    for (header, data), number in zip(raw[:-1], numbers[kept].tolist()):
        assert header == format_header(frame_number=number, frame_index=number - 1,
                                       shape=(400, 400), packets=50,
                                       progress=100 * number / VIRTUAL_FRAMES)
        assert len(data) == 320_000


def test_two_interfaces_are_assembled_and_a_padded_half_is_never_clustered(receivers, sim,
                                                                           pedestal):
    setup = receivers["two"]
    frames, _ = sim.frames(10, start=30)
    numbers = np.arange(1, 11)
    with StreamSource(setup.endpoints) as skip, \
            StreamSource(setup.endpoints, incomplete="mask") as mask:
        time.sleep(JOIN)
        # frame 4's lower half (interface 1) loses packet 3: padded with 0xFF
        send_run(setup, {int(n): [f[:200], f[200:]] for n, f in zip(numbers, frames)},
                 short={(4, 1)})
        skipped, masked = list(skip.chunks()), list(mask.chunks())
        stats = skip.stats, mask.stats
    kept = numbers != 4
    assert np.concatenate([c.numbers for c in skipped]).tolist() == numbers[kept].tolist()
    np.testing.assert_array_equal(np.concatenate([c.frames for c in skipped]), frames[kept])
    assert np.concatenate([c.numbers for c in masked]).tolist() == numbers.tolist()
    for s in stats:
        assert (s.frames_received, s.frames_incomplete, s.frames_lost) == (10, 1, 0)

    # Packet 3 of the lower half: rows 200 + 3 * 8 ... of the frame (400 pixels a row).
    rows = slice(200 + 3 * PACKET_DATA // 800, 200 + 4 * PACKET_DATA // 800)
    frame4 = np.concatenate([c.frames for c in masked])[3]
    np.testing.assert_array_equal(frame4[rows], 0)
    outside = np.ones(400, bool)
    outside[rows] = False
    np.testing.assert_array_equal(frame4[outside], frames[3][outside])

    # Masked, no cluster in the padding; as padded, it would have been full of them.
    live = find_live(pedestal, masked)
    in_gap = (live.frame_number == 4) & (live.y >= rows.start) & (live.y < rows.stop)
    assert int(in_gap.sum()) == 0
    assert int((live.frame_number == 4).sum()) > 1000  # the rest of the frame is used
    padded = frames[3:4].copy()
    padded[0, rows] = 0xFFFF
    naive = find_offline(pedestal, padded, [4])
    assert int(((naive.y >= rows.start) & (naive.y < rows.stop)).sum()) > 50


def test_a_virtual_server_acquisition_is_consumed_to_its_end_message(receivers):
    setup = receivers["one"]
    with StreamSource(setup.endpoints) as source:
        time.sleep(JOIN)
        setup.acquire()
        chunks = list(source.chunks())
        assert source.ended.is_set()
        stats = source.stats
    numbers = np.concatenate([c.numbers for c in chunks])
    frames = np.concatenate([c.frames for c in chunks])
    assert numbers.tolist() == list(range(1, VIRTUAL_FRAMES + 1))
    # The virtual MÖNCH's test pattern: every pixel of packet p reads p + 1.
    pattern = np.repeat(np.arange(1, 51, dtype=np.uint16), PACKET_DATA // 2)
    assert (frames.reshape(len(frames), -1) == pattern).all()
    assert (stats.frames_received, stats.acquisitions_ended, stats.frames_lost) == (
        VIRTUAL_FRAMES, 1, 0)


def test_frames_the_receiver_never_streamed_after_the_last_are_lost(receivers, sim):
    """The receiver was told of VIRTUAL_FRAMES frames (its progress counts them): of an
    acquisition stopped after 12, the 8 never sent are lost, counted at its end."""
    setup = receivers["one"]
    frames, _ = sim.frames(12, start=60)
    with StreamSource(setup.endpoints) as source:
        time.sleep(JOIN)
        send_run(setup, {n: [f] for n, f in enumerate(frames, 1)})
        numbers = [n for chunk in source.chunks() for n in chunk.numbers.tolist()]
        stats = source.stats
    assert numbers == list(range(1, 13))
    assert (stats.frames_received, stats.frames_lost, stats.acquisitions_ended) == (
        12, VIRTUAL_FRAMES - 12, 1)
