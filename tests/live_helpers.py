"""The live path over real sockets on 127.0.0.1, in this process: a `StreamPublisher` sends
on a thread once the consumer has subscribed, while `aare-lab live` or a `LiveRun` runs."""

import threading
import warnings

from aare_lab.cli import main
from aare_lab.sources import StreamSource
from aare_lab.stream.live import LiveRun
from aare_lab.stream.publisher import StreamPublisher


def live_cli(publisher, send, *args):
    """``aare-lab live ENDPOINTS ARGS...`` while ``send()`` publishes (and ends the
    acquisition); returns the exit code. An error of ``send`` ends the acquisition and is
    raised here."""
    failed = []

    def publish():
        try:
            publisher.wait_for_subscribers(timeout=30)
            send()
        except Exception as err:  # noqa: BLE001 -- raised below
            failed.append(err)
            publisher.end_acquisition()

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    code = main(["live", *publisher.endpoints, *args])
    thread.join(30)
    if failed:
        raise failed[0]
    return code


def live_run(frames, spec, out, n_dark, **options):
    """A `LiveRun` (with ``options``) that trains on the first ``n_dark`` of ``frames``,
    sent in one acquisition; returns its source and every warning the run raised."""
    with StreamPublisher("tcp://127.0.0.1:0") as pub:
        source = StreamSource(pub.endpoints, frame_shape=frames.shape[1:], stop_at_end=True)

        def send():
            pub.wait_for_subscribers(timeout=30)
            pub.send_frames(frames)
            pub.end_acquisition()

        sender = threading.Thread(target=send, daemon=True)
        live = LiveRun(source, spec, out, n_dark=n_dark, report=lambda line: None,
                       **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sender.start()
            live.run()
        sender.join(30)
    return source, caught
