// A stand-in for livekit-client at the network edge, served in place of
// /static/vendor/livekit-client.umd.js by the browser test. No LiveKit server runs here, so this
// Room "connects" at once and replays window.__FAKE_LIVEKIT: an agent participant, transcript
// text streams on lk.transcription, and frontdesk.task RPC payloads recorded from the real
// TaskRpc. Everything the page does to the room is recorded on window.__fakeRoom.
(function () {
  "use strict";
  var script = window.__FAKE_LIVEKIT || { agent: "agent-1", steps: [], tasks: { v: 1, tasks: [] } };
  var RoomEvent = { ParticipantConnected: "participantConnected", TrackSubscribed: "trackSubscribed",
                    Disconnected: "disconnected" };
  var record = { connected: null, rpcCalls: [], rpcReplies: [], micEnabled: false };
  window.__fakeRoom = record;

  function claims(token) {
    var part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "===".slice((part.length + 3) % 4)));
  }

  function Room() {
    this.listeners = {};
    this.rpc = {};
    this.streams = {};
    this.remoteParticipants = new Map();
    this.localParticipant = null;
  }
  Room.prototype.on = function (name, fn) { (this.listeners[name] = this.listeners[name] || []).push(fn); return this; };
  Room.prototype.emit = function (name, arg) { (this.listeners[name] || []).forEach(function (fn) { fn(arg); }); };
  Room.prototype.registerRpcMethod = function (name, fn) { this.rpc[name] = fn; };
  Room.prototype.registerTextStreamHandler = function (topic, fn) { this.streams[topic] = fn; };
  Room.prototype.disconnect = function () { this.emit(RoomEvent.Disconnected); };
  Room.prototype.connect = function (url, token) {
    var room = this;
    var me = claims(token).sub;
    record.connected = { url: url, token: token, identity: me };
    room.localParticipant = {
      identity: me,
      setMicrophoneEnabled: function (on) { record.micEnabled = on; return Promise.resolve(); },
      performRpc: function (req) {
        record.rpcCalls.push({ to: req.destinationIdentity, method: req.method, payload: JSON.parse(req.payload) });
        if (req.method === "frontdesk.tasks") { return Promise.resolve(JSON.stringify(script.tasks)); }
        if (req.method === "frontdesk.cancel") {
          var id = JSON.parse(req.payload).task_id;
          return Promise.resolve(JSON.stringify({ v: 1, task_id: id, status: "cancelled" }));
        }
        return Promise.reject(new Error("method not supported"));
      },
    };
    setTimeout(function () { replay(room, me); }, 0);
    return Promise.resolve();
  };

  function reader(info, chunks) {
    return {
      info: info,
      [Symbol.asyncIterator]: async function* () { for (var c of chunks) { yield c; } },
    };
  }

  async function replay(room, me) {
    var agent = { identity: script.agent, isAgent: true };
    room.remoteParticipants.set(agent.identity, agent);
    room.emit(RoomEvent.ParticipantConnected, agent);
    for (var step of script.steps) {
      if (step.transcript) {
        var t = step.transcript;
        var from = t.from === "caller" ? { identity: me } : { identity: script.agent };
        await room.streams["lk.transcription"](
          reader({ id: t.stream, topic: "lk.transcription", attributes: t.attributes }, t.chunks), from);
      } else if (step.rpc) {
        var reply = await room.rpc["frontdesk.task"]({
          requestId: "r" + record.rpcReplies.length, callerIdentity: script.agent,
          payload: JSON.stringify(step.rpc), responseTimeout: 5000,
        });
        record.rpcReplies.push(reply);
      }
      await new Promise(function (r) { setTimeout(r, 0); });
    }
    record.replayed = true;
    // Also on the DOM: tests wait with selectors (a string predicate would need eval, which the
    // console's Content-Security-Policy rightly refuses).
    document.documentElement.dataset.replayed = "yes";
  }

  window.LivekitClient = { Room: Room, RoomEvent: RoomEvent };
})();
