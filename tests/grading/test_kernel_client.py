"""The graded kernel's client: ready once IOPub has carried the idle status of its
kernel_info request, with nothing of the kernel's start left to read."""
from queue import Empty

import pytest
from jupyter_client.manager import AsyncKernelManager

from grader.grading.kernel_client import GradingKernelClient

pytestmark = pytest.mark.xdist_group("kernel_client")


async def _ready_then_run(rounds):
    km = AsyncKernelManager(kernel_name="python3")
    km.client_factory = GradingKernelClient
    await km.start_kernel()
    kc = km.client()
    assert isinstance(kc, GradingKernelClient)
    kc.start_channels()
    seen = []  # what each of the client's reads on IOPub gave: a message, or None (silence)
    read = kc.iopub_channel.get_msg

    async def spied(*args, **kwargs):
        try:
            msg = await read(*args, **kwargs)
        except Empty:
            seen.append(None)
            raise
        seen.append(msg)
        return msg

    try:
        for _ in range(rounds):
            seen.clear()
            kc.iopub_channel.get_msg = spied
            await kc.wait_for_ready(timeout=120)
            kc.iopub_channel.get_msg = read
            # ready at the idle status of its last kernel_info request, then of the silent
            # request that makes the kernel keep the output bounds: never after a wait for
            # IOPub to fall silent (jupyter_client's own client waits 0.2 s of silence)
            statuses = [(m["parent_header"].get("msg_type"), m["content"]["execution_state"])
                        for m in seen if m is not None and m["msg_type"] == "status"]
            assert seen[-1] is not None and statuses[-1] == ("execute_request", "idle"), seen
            assert ("kernel_info_request", "idle") in statuses
            assert [m["msg_type"] for m in seen if m is not None
                    and m["parent_header"].get("msg_type") == "execute_request"] == ["status", "status"]
            left = []
            while True:  # nothing of the start or of the handshake is still waiting on IOPub
                try:
                    left.append(await kc.iopub_channel.get_msg(timeout=0.3))
                except Empty:
                    break
            assert left == [], [(m["msg_type"], m["content"]) for m in left]
        msg_id = kc.execute("print(6 * 7)")  # the first execution count: the set-up counts none
        printed = []
        while True:
            msg = await kc.iopub_channel.get_msg(timeout=60)
            assert msg["parent_header"].get("msg_id") == msg_id, msg  # the first message is ours
            if msg["msg_type"] == "stream":
                printed.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        assert "".join(printed) == "42\n"
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


@pytest.mark.parametrize("rounds", [1, 3])
def test_ready_leaves_nothing_of_the_start_on_iopub_and_the_first_output_arrives(rounds):
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    # on a thread of its own: an earlier test in this process (nbclient's run_sync, say) may
    # have left this thread's event loop marked as running, where asyncio.run refuses to start
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _ready_then_run(rounds)).result()


def test_graded_notebooks_use_it():
    from grader.grading.execute import GradingExecute

    ex = GradingExecute(kernel_name="python3", max_output_bytes=1000)
    factory = ex.create_kernel_manager().client_factory
    assert issubclass(factory, GradingKernelClient) and factory.output_bounds.output == 1000


def test_a_client_leaves_no_socket_open_when_it_stops():
    """A worker grades thousands of notebooks, one client each: the monitor sockets that
    watch the client's connections are closed with its channels, also where the client
    shares a zmq context it does not destroy."""
    import asyncio

    import zmq.asyncio

    async def channels():
        km = AsyncKernelManager(kernel_name="python3")
        km.client_factory = GradingKernelClient
        await km.start_kernel()
        try:
            kc = km.client(context=zmq.asyncio.Context())
            kc.start_channels()
            await kc.wait_for_ready(timeout=120)
            found = [kc.shell_channel, kc.iopub_channel, kc.stdin_channel, kc.control_channel]
            kc.stop_channels()
            return found
        finally:
            await km.shutdown_kernel(now=True)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # on a thread of its own, as above
        found = pool.submit(asyncio.run, channels()).result()
    assert all(c.monitor.closed and c.socket is None for c in found)


def test_a_reply_whose_wakeup_was_lost_is_still_read():
    """A zmq socket's file descriptor signals only a change, once: where something drains
    that signal before the event loop sees it (here a direct poll of the socket, standing in
    for the lost signal that left notebook 05's execute_reply unread until its cell's time
    limit stopped an idle kernel), the channel still reads the reply, within POLL_SLICE."""
    import asyncio
    import time

    import zmq
    import zmq.asyncio
    from jupyter_client.session import Session

    from grader.grading.kernel_client import POLL_SLICE, BoundedChannel

    async def scenario():
        session = Session(key=b"lost-wakeup")
        kernel = zmq.Context.instance().socket(zmq.ROUTER)  # the kernel's side, blocking
        port = kernel.bind_to_random_port("tcp://127.0.0.1")
        client = zmq.asyncio.Context.instance().socket(zmq.DEALER)
        client.connect(f"tcp://127.0.0.1:{port}")
        channel = BoundedChannel(client, session)
        try:
            channel.send(session.msg("kernel_info_request", {}))
            ident = kernel.recv_multipart()[0]
            waiting = asyncio.ensure_future(channel.get_msg(timeout=None))
            await asyncio.sleep(0.2)  # the channel is waiting on the event loop
            sent = time.monotonic()
            session.send(kernel, "kernel_info_reply", {"status": "ok"}, ident=ident)
            direct = zmq.Socket.shadow(client.underlying)
            assert direct.poll(5000) == zmq.POLLIN  # the reply is there, and its signal drained
            reply = await asyncio.wait_for(waiting, 10)
            return reply["msg_type"], time.monotonic() - sent
        finally:
            channel.close()
            kernel.close(linger=0)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # on a thread of its own, as above
        msg_type, waited = pool.submit(asyncio.run, scenario()).result()
    assert msg_type == "kernel_info_reply"
    print(f"read {waited:.2f} s after it was sent (POLL_SLICE {POLL_SLICE} s)")
