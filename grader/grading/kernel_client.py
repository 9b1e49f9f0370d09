"""The client of a graded kernel: ready as soon as the kernel is.

jupyter_client's wait_for_ready, once the kernel has answered kernel_info, reads IOPub
until it has been silent for 0.2 s: a fixed 0.2 s of every submission, spent waiting.
Here the client is ready when IOPub has carried the kernel's "idle" status for that very
kernel_info request: the kernel sends it after the reply, so everything it published before
has arrived, and IOPub is known to be connected (a subscription made too late misses the
status, and the request is sent again, as jupyter_client does).
"""
import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.utils import ensure_async

SHELL_WAIT = 1.0  # seconds for the kernel_info reply before asking again
IOPUB_WAIT = 1.0  # seconds for that request's idle status before asking again


class GradingKernelClient(AsyncKernelClient):
    async def wait_for_ready(self, timeout=None):
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            msg_id = self.kernel_info()
            reply = await self._reply_to(msg_id, min(SHELL_WAIT, max(0.0, deadline - time.monotonic())))
            if reply is not None and await self._idle_after(msg_id, IOPUB_WAIT):
                self._handle_kernel_info_reply(reply)
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _reply_to(self, msg_id, wait):
        """The kernel_info_reply to msg_id within wait seconds, or None (earlier requests'
        replies are passed over)."""
        end = time.monotonic() + wait
        while True:
            try:
                msg = await ensure_async(self.shell_channel.get_msg(timeout=max(0.0, end - time.monotonic())))
            except Empty:
                return None
            if msg["msg_type"] == "kernel_info_reply" and msg["parent_header"].get("msg_id") == msg_id:
                return msg

    async def _idle_after(self, msg_id, wait):
        """Whether IOPub carries the idle status of request msg_id within wait seconds;
        what comes before it (the kernel's start, earlier requests) is read and dropped."""
        end = time.monotonic() + wait
        while True:
            try:
                msg = await ensure_async(self.iopub_channel.get_msg(timeout=max(0.0, end - time.monotonic())))
            except Empty:
                return False
            if (msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle"
                    and msg["parent_header"].get("msg_id") == msg_id):
                return True
