// Helpers for the usage-record tests: read the spool's JSON Lines segments the way a billing
// pipeline would (complete lines only), and wait for records to appear.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { binaries, waitFor } from './harness.mjs';

// Every decodable entry of every segment, oldest segment first: [{...entry, segment}].
// An unterminated last line (a write cut by SIGKILL) is skipped, as the proxy's readers do.
export function readSpool(dir) {
  if (!existsSync(dir)) return [];
  const entries = [];
  const files = readdirSync(dir).filter((f) => /^usage-\d{20}\.jsonl$/.test(f)).sort();
  for (const file of files) {
    const text = readFileSync(path.join(dir, file), 'utf8');
    const lines = text.split('\n');
    lines.pop();  // "" after the last newline, or a cut tail
    for (const line of lines) {
      if (!line) continue;
      try {
        entries.push({ ...JSON.parse(line), segment: file });
      } catch {
        entries.push({ type: 'malformed', line, segment: file });
      }
    }
  }
  return entries;
}

// The close entries (usage records).
export function readRecords(dir) {
  return readSpool(dir).filter((e) => e.type === 'close');
}

// Waits until a record with this request id (x-request-id) is in the spool; returns it.
export async function waitRecord(dir, requestId, timeoutMs = 5000) {
  return waitFor(() => readRecords(dir).find((r) => r.request_id === requestId),
    { timeoutMs, intervalMs: 20, what: `the usage record of ${requestId}` });
}

// Runs `tokenmeter usage ARGS...`: {code, stdout, stderr}.
export function runUsage(args) {
  const { bin } = binaries();
  return new Promise((resolve) => {
    execFile(bin, ['usage', ...args], (error, stdout, stderr) => {
      resolve({ code: error ? error.code : 0, stdout, stderr });
    });
  });
}

// What a billing receiver checks in one POSTed body: the CloudEvents batch content type and
// shape of every event. Counts each event by id in `received` (id -> times) and pushes each
// problem found onto `problems`.
export function takeCloudEventsBatch(req, body, received, problems) {
  if (req.headers['content-type'] !== 'application/cloudevents-batch+json') {
    problems.push(`content-type ${req.headers['content-type']}`);
  }
  let batch;
  try { batch = JSON.parse(body.toString()); } catch (e) {
    problems.push(`not JSON: ${e.message}`);
  }
  for (const event of Array.isArray(batch) ? batch : []) {
    if (event.specversion !== '1.0' || event.type !== 'tokenmeter.usage.v1' ||
      event.datacontenttype !== 'application/json' || !event.source || !event.time ||
      event.subject !== event.data.tenant || event.id !== event.data.id) {
      problems.push(`bad event ${JSON.stringify(event)}`);
    }
    received.set(event.id, (received.get(event.id) || 0) + 1);
  }
}
