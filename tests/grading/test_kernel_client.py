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
