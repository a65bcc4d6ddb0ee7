// Text to speech through the real proxy, in front of an upstream that answers as OpenAI's
// /v1/audio/speech does: the audio itself (bytes passed on unchanged, the input billed by the
// reference tokenizer's count of the text to speak, the output unknown: audio is never counted
// as text), or with "stream_format": "sse" speech.audio.delta events and a speech.audio.done
// whose usage bills both. A body that is not JSON is refused as on every metered API; a broken
// event is forwarded and counted.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawnSync } from 'node:child_process';

import {
  binaries, makeTempDir, request, startProxy, stopAll, waitMetrics,
} from './lib/harness.mjs';
import { waitRecord } from './lib/usage.mjs';

// Bytes that are no text: an MP3 frame header and every byte value.
const AUDIO = Buffer.concat([Buffer.from([0xff, 0xf3, 0x44, 0xc4]), Buffer.from([...Array(256).keys()])]);

let upstream;
after(async () => {
  await stopAll();
  upstream?.close();
});

function o200k(text) {
  const { bin } = binaries();
  const run = spawnSync(bin, ['tokenize', '--tokenizer', 'o200k_base'], { input: text, encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.status, 0, run.stderr);
  return Number(run.stdout.trim());
}

async function startSpeechServer() {
  const server = http.createServer((req, res) => {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => {
      let body;
      try {
        body = JSON.parse(Buffer.concat(parts).toString());
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'bad json' } }));
        return;
      }
      if (body.stream_format === 'sse') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify({ type: 'speech.audio.delta', audio: AUDIO.toString('base64') })}\n\n`);
        if (body.input === 'broken') res.write('data: {"type":\n\n');
        res.end(`data: ${JSON.stringify({ type: 'speech.audio.done', usage: { input_tokens: 9, output_tokens: 120, total_tokens: 129 } })}\n\n`);
        return;
      }
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': AUDIO.length });
      res.end(AUDIO);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

test('speech: audio passed on unchanged, input counted from the text, output unknown; SSE usage billed', { timeout: 60_000 }, async () => {
  upstream = await startSpeechServer();
  const spool = makeTempDir('tokenmeter-speech-');
  const proxy = await startProxy({
    upstream: upstream.address().port,
    config: `usage:\n  spool_dir: ${spool}\n  checkpoint_interval: 100ms\nreference_tokenizer: o200k_base\n`,
  });
  const text = 'The quick brown fox jumps over the lazy dog.';
  const instructions = 'Speak like a newsreader.';

  const audio = await request({ port: proxy.port, path: '/v1/audio/speech',
    body: { model: 'tts-m', input: text, instructions, voice: 'alloy' },
    headers: { 'x-request-id': 'speech-audio' } });
  assert.equal(audio.status, 200);
  assert.deepEqual(audio.body, AUDIO, 'the audio bytes pass unchanged');
  const record = await waitRecord(spool, 'speech-audio');
  assert.equal(record.api, 'openai_speech', JSON.stringify(record));
  assert.equal(record.model, 'tts-m');
  assert.equal(record.outcome, 'complete');
  assert.equal(record.input_tokens, o200k(`${text}\n${instructions}`), JSON.stringify(record));
  assert.equal(record.input_source, 'normalized');
  assert.equal(record.output_tokens, null, JSON.stringify(record));
  assert.equal(record.output_source, 'none');
  assert.equal(record.ttft_s, null);

  const sse = await request({ port: proxy.port, path: '/v1/audio/speech',
    body: { model: 'tts-m', input: text, stream_format: 'sse' },
    headers: { 'x-request-id': 'speech-sse' } });
  assert.equal(sse.status, 200);
  assert.match(sse.body.toString(), /speech\.audio\.done/);
  const streamed = await waitRecord(spool, 'speech-sse');
  assert.equal(streamed.streamed, true);
  assert.equal(streamed.input_tokens, 9);
  assert.equal(streamed.input_source, 'reported');
  assert.equal(streamed.output_tokens, 120);
  assert.equal(streamed.output_source, 'reported');
  assert.equal(streamed.output_audio_tokens, 120, 'everything spoken is audio');

  // A broken event is forwarded unchanged and counted; the usage after it still bills.
  const broken = await request({ port: proxy.port, path: '/v1/audio/speech',
    body: { model: 'tts-m', input: 'broken', stream_format: 'sse' },
    headers: { 'x-request-id': 'speech-broken' } });
  assert.match(broken.body.toString(), /data: \{"type":\n\n/);
  assert.equal((await waitRecord(spool, 'speech-broken')).output_tokens, 120);

  // Not JSON: refused before the upstream, as on every metered API.
  const bad = await request({ port: proxy.port, path: '/v1/audio/speech', body: 'not json',
    headers: { 'content-type': 'application/json' } });
  assert.equal(bad.status, 400, bad.body.toString());
  assert.ok(JSON.parse(bad.body.toString()).error);

  // Each request's series are recorded at its end, which may follow its record on disk.
  const m = await waitMetrics(proxy, (x) =>
    x.value('tokenmeter_parse_errors_total', { api: 'openai_speech', reason: 'invalid_json' }) >= 1 &&
    x.value('tokenmeter_tokens_total', { model: 'tts-m', type: 'output' }) >= 240);
  assert.equal(m.value('tokenmeter_parse_errors_total', { api: 'openai_speech', reason: 'invalid_json' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model: 'tts-m', type: 'output' }), 240);
});
