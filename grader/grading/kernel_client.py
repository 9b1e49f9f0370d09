"""The client of a graded kernel: ready as soon as the kernel is, and never made to read
more than the bounds allow.

jupyter_client's wait_for_ready, once the kernel has answered kernel_info, reads IOPub
until it has been silent for 0.2 s: a fixed 0.2 s of every submission, spent waiting.
Here the client is ready when IOPub has carried the kernel's "idle" status for that very
kernel_info request: the kernel sends it after the reply, so everything it published before
has arrived, and IOPub is known to be connected (a subscription made too late misses the
status, and the request is sent again, as jupyter_client does).

Bounded before it is read: every socket of the client refuses a message larger than
`max_message_bytes` (libzmq's ZMQ_MAXMSGSIZE, checked on the message's length before
anything is received or allocated), so a kernel that sends 2 GB costs the grading process
neither memory nor time. libzmq drops the connection that carried such a message and does
not reconnect it by itself: the channel sees that on the socket's monitor, connects again,
and tells the cell what happened: on IOPub a note in the cell's output ("an output of more
than 16 MiB was dropped unread"), on the shell channel an error reply for the request it
waited for. Messages that are not well-formed (a bad signature, no JSON) are left out.

Before the first cell, the kernel is also made to keep the output bounds itself
(grader.grading.bounds.kernel_code): an output over them is cut where it is made, before it
is serialised, so that printing 300 MB costs the notebook's own CPU budget the string and
no more, and the graded notebook says how large the output was. The student's code can
undo that in its own kernel; what it then sends is refused above.
"""
import time
from queue import Empty

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel, HBChannel
from jupyter_client.connect import channel_socket_types
from jupyter_client.utils import ensure_async
from traitlets import Type
from zmq.utils.monitor import parse_monitor_message

from grader.grading import bounds

SHELL_WAIT = 1.0  # seconds for the kernel_info reply before asking again
IOPUB_WAIT = 1.0  # seconds for that request's idle status before asking again
MAX_MESSAGE_BYTES = 16 * 2**20  # one frame of a message from a graded kernel (the notebook's output bound)
RECONNECT_WAIT = 5.0  # seconds the channel waits for the kernel to answer when it connects again
# The longest a channel waits on its sockets' readiness as the event loop reports it before it
# asks the sockets themselves. A zmq socket's file descriptor only signals a change, and once in
# some thirty gradings of notebook 05 (its widget drawing its chart just before the cell ended)
# that signal was lost: the cell's execute_reply sat in the shell socket, unread, until the
# cell's time limit stopped an idle kernel. A poll that times out reads the sockets' state
# directly (zmq_poll), so a lost signal costs at most this long.
POLL_SLICE = 0.5
DROPPED = "OutputDropped"


def dropped_note(limit):
    return (f"\n[output dropped unread: the kernel sent a message of more than {bounds._human(limit)}, "
            f"more than the grading process reads]\n")


class BoundedChannel(AsyncZMQSocketChannel):
    """A channel whose socket refuses messages over the bound (set before it connected), and
    that connects again when libzmq dropped the connection over one, saying so. `url`: the
    kernel's address; `dropped(channel)`: the message that stands for a dropped one, or None."""

    url = None
    dropped = None

    def __init__(self, socket, session, loop=None):
        super().__init__(socket, session, loop)
        self.monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self.drops = 0

    async def get_msg(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            poller = zmq.asyncio.Poller()
            poller.register(self.socket, zmq.POLLIN)
            poller.register(self.monitor, zmq.POLLIN)
            wait = POLL_SLICE if left is None else min(left, POLL_SLICE)
            ready = dict(await poller.poll(int(wait * 1000)))
            if self.monitor in ready:
                stand_in = await self._after_event()
                if stand_in is not None:
                    return stand_in
                continue
            if self.socket in ready:
                try:
                    return await self._recv()
                except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                    continue  # not a well-formed message of this session: left out
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty

    async def _after_event(self):
        """After a monitor event: where the connection was dropped, connect again and return
        the message that stands for what was dropped (None where the kernel went away)."""
        event = parse_monitor_message(await self.monitor.recv_multipart())
        if event["event"] != zmq.EVENT_DISCONNECTED or self.url is None:
            return None
        try:  # libzmq ends the session of a connection that carried too large a message
            self.socket.disconnect(self.url)
        except zmq.ZMQError:
            pass
        self.socket.connect(self.url)
        end = time.monotonic() + RECONNECT_WAIT
        while time.monotonic() < end:  # the kernel is still there: it answers the handshake
            if await self.monitor.poll(int(max(0.0, end - time.monotonic()) * 1000) + 1):
                again = parse_monitor_message(await self.monitor.recv_multipart())
                if again["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self.drops += 1
                    return self.dropped(self) if self.dropped else None
        return None  # it went away: the kernel's death is reported as such

    def close(self):
        if self.socket is not None:
            try:
                self.socket.disable_monitor()
            except zmq.ZMQError:
                pass
        self.monitor.close(linger=0)
        super().close()

    stop = close  # (jupyter_client's stop is its own close, bound when its class was made)


class BoundedHBChannel(HBChannel):
    def _create_socket(self):
        if self.socket is not None:
            self.poller.unregister(self.socket)
            self.socket.close()
        self.socket = self.context.socket(zmq.REQ)
        self.socket.linger = 1000
        self.socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        if getattr(self, "curve_serverkey", None) is not None:  # as jupyter_client's own
            client_pub, client_sec = zmq.curve_keypair()
            self.socket.curve_secretkey, self.socket.curve_publickey = client_sec, client_pub
            self.socket.curve_serverkey = self.curve_serverkey
        self.socket.connect(self.address)
        self.poller.register(self.socket, zmq.POLLIN)


class GradingKernelClient(AsyncKernelClient):
    shell_channel_class = Type(BoundedChannel)
    iopub_channel_class = Type(BoundedChannel)
    stdin_channel_class = Type(BoundedChannel)
    control_channel_class = Type(BoundedChannel)
    hb_channel_class = Type(BoundedHBChannel)
    max_message_bytes = MAX_MESSAGE_BYTES
    output_bounds = bounds.OutputBounds()  # what the kernel is made to keep itself
    _executing = None  # msg_id of the last execute request

    @classmethod
    def bounded(cls, output_bounds):
        """This client, making its kernels keep output_bounds (a class: kernel managers take one)."""
        return type(cls.__name__, (cls,), {"output_bounds": output_bounds, "__module__": cls.__module__})

    def _create_connected_socket(self, channel, identity=None):
        """jupyter_client's socket, with the size bound set before it connects."""
        url = self._make_url(channel)
        sock = self.context.socket(channel_socket_types[channel])
        sock.linger = 1000
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        if identity:
            sock.identity = identity
        if getattr(self, "curve_publickey", None) is not None:
            sock.curve_secretkey = self.curve_secretkey
            sock.curve_publickey = self.curve_publickey
            sock.curve_serverkey = self.curve_publickey
        sock.connect(url)
        return sock

    def _bounded(self, channel, name):
        if isinstance(channel, BoundedChannel) and channel.url is None:
            channel.url = self._make_url(name)
            channel.dropped = self._stand_in(name)
        return channel

    @property
    def shell_channel(self):
        return self._bounded(super().shell_channel, "shell")

    @property
    def iopub_channel(self):
        return self._bounded(super().iopub_channel, "iopub")

    @property
    def stdin_channel(self):
        return self._bounded(super().stdin_channel, "stdin")

    @property
    def control_channel(self):
        return self._bounded(super().control_channel, "control")

    def _stand_in(self, name):
        """What stands for a message dropped on a channel: on IOPub a note in the output of
        the cell that runs; on shell an error reply to the request waited for."""
        def make(channel):
            parent = {"msg_id": self._executing, "msg_type": "execute_request"} if self._executing else {}
            note = dropped_note(self.max_message_bytes)
            if name == "iopub" and parent:
                return self.session.msg("stream", {"name": "stderr", "text": note}, parent=parent)
            if name == "shell" and parent:
                return self.session.msg("execute_reply", {
                    "status": "error", "ename": DROPPED, "evalue": note.strip(), "traceback": [note.strip()],
                    "execution_count": None}, parent=parent)
            return None
        return make

    def execute(self, code, *args, **kwargs):
        self._executing = super().execute(code, *args, **kwargs)
        return self._executing

    async def wait_for_ready(self, timeout=None):
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            msg_id = self.kernel_info()
            reply = await self._reply_to(msg_id, min(SHELL_WAIT, max(0.0, deadline - time.monotonic())))
            if reply is not None and await self._idle_after(msg_id, IOPUB_WAIT):
                self._handle_kernel_info_reply(reply)
                await self._keep_bounds(deadline)
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _keep_bounds(self, deadline):
        """Make the kernel keep the output bounds itself (silently: no output, no execution
        count), and read what that leaves on IOPub up to its idle status."""
        msg_id = super().execute(bounds.kernel_code(self.output_bounds), silent=True, store_history=False)
        wait = min(60.0, max(1.0, deadline - time.monotonic()))
        reply = await self._reply_to(msg_id, wait, "execute_reply")
        if reply is None:
            raise RuntimeError("the kernel did not answer while it was set up for grading")
        if reply["content"].get("status") != "ok":  # a kernel that is not IPython's: the sockets' bound holds
            self.log.warning("the kernel does not keep the output bounds itself: %s",
                             reply["content"].get("evalue", "")[:200])
        await self._idle_after(msg_id, wait)

    async def _reply_to(self, msg_id, wait, msg_type="kernel_info_reply"):
        """The reply of msg_type to msg_id within wait seconds, or None (earlier requests'
        replies are passed over)."""
        end = time.monotonic() + wait
        while True:
            try:
                msg = await ensure_async(self.shell_channel.get_msg(timeout=max(0.0, end - time.monotonic())))
            except Empty:
                return None
            if msg["msg_type"] == msg_type and msg["parent_header"].get("msg_id") == msg_id:
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
