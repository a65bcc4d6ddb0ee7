// A model server that reads requests the way the Python servers tokenmeter runs in front of do
// (vLLM and SGLang on uvicorn, FastAPI and Python's json), so a test can show what such a server
// would serve and check that the proxy metered exactly that:
//
//   - the path is percent-decoded whole, "%2F" included (uvicorn's unquote), and routed as is:
//     no dot-segment removal, case-sensitive;
//   - the body is read as Python's json.loads reads it: NaN, Infinity and -Infinity, numbers past
//     a double (1e400 is inf), lone surrogate escapes;
//   - with `apiKeys`, POST /v1/... needs `Authorization: Bearer <key>` exactly, the first
//     Authorization field only (vLLM's check); otherwise 401;
//   - a response is gzip-compressed when the request's Accept-Encoding allows gzip, or always
//     when the request carries `x-test-compress: always` (an upstream that ignores identity);
//   - a model whose name starts with "invented-" is not served: 404, as vLLM answers a model it
//     does not have (after reading the body, so the request was received);
//   - `x-test-pad: N` adds N bytes of text to a non-streamed answer's content, before its usage
//     report (a large answer: logprobs, a large n).
//
// OpenAI chat completions and completions are served, streamed or not, with a usage report of
// PROMPT_TOKENS in and COMPLETION_TOKENS out (on a stream only when stream_options.include_usage
// asks for it, as vLLM does). Every request is recorded: upstream.requests() →
// [{method, rawTarget, path, headers (raw pairs), body (Buffer), served}].
import http from 'node:http';
import zlib from 'node:zlib';

export const PROMPT_TOKENS = 11;
export const COMPLETION_TOKENS = 7;
const PIECES = ['Hello', ' from', ' the', ' model', ' server', ' as', ' read'];

// Python's urllib.parse.unquote: every valid %XX decoded to a byte, then UTF-8 with replacement;
// an invalid escape stays as it is.
export function unquote(raw) {
  const bytes = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '%' && /^[0-9a-fA-F]{2}$/.test(raw.slice(i + 1, i + 3))) {
      bytes.push(parseInt(raw.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(c, 'latin1'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

// Python's json.loads, for what a test sends: NaN, Infinity and -Infinity outside strings become
// JavaScript's (JSON.parse already reads lone surrogates and 1e400 as Python does). Throws where
// Python raises.
export function pythonJsonLoads(text) {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') {
        out += c + (text[i + 1] ?? '');
        i += 1;
        continue;
      }
      if (c === '"') inString = false;
      out += c;
      continue;
    }
    if (c === '"') inString = true;
    const word = ['-Infinity', 'Infinity', 'NaN'].find((w) => text.startsWith(w, i));
    if (word) {
      out += `"\\u0000${word}"`;  // a string no client sends, turned back into the number below
      i += word.length - 1;
      continue;
    }
    out += c;
  }
  const special = { '\u0000-Infinity': -Infinity, '\u0000Infinity': Infinity, '\u0000NaN': NaN };
  return JSON.parse(out, (key, value) => (typeof value === 'string' && Object.hasOwn(special, value) ? special[value] : value));
}

function acceptsGzip(value) {
  if (!value) return false;
  return value.split(',').some((item) => {
    const [coding, ...params] = item.trim().split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    return (coding === 'gzip' || coding === '*') && (!q || Number(q.slice(2)) > 0);
  });
}

function completionBody(model, chat, pad = 0) {
  const text = PIECES.join('') + ' '.repeat(pad);
  const choice = chat
    ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }
    : { index: 0, text, finish_reason: 'stop' };
  return JSON.stringify({
    id: 'cmpl-test', object: chat ? 'chat.completion' : 'text_completion', created: 1, model,
    choices: [choice],
    usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: COMPLETION_TOKENS, total_tokens: PROMPT_TOKENS + COMPLETION_TOKENS },
  });
}

function streamBody(model, chat, includeUsage) {
  const object = chat ? 'chat.completion.chunk' : 'text_completion';
  const event = (choices, usage) => `data: ${JSON.stringify({ id: 'cmpl-test', object, created: 1, model, choices, ...(usage !== undefined ? { usage } : {}) })}\n\n`;
  let out = '';
  PIECES.forEach((piece, i) => {
    const choice = chat ? { index: 0, delta: i === 0 ? { role: 'assistant', content: piece } : { content: piece }, finish_reason: null }
      : { index: 0, text: piece, finish_reason: null };
    out += event([choice], includeUsage ? null : undefined);
  });
  out += event([chat ? { index: 0, delta: {}, finish_reason: 'stop' } : { index: 0, text: '', finish_reason: 'stop' }], includeUsage ? null : undefined);
  if (includeUsage) {
    out += event([], { prompt_tokens: PROMPT_TOKENS, completion_tokens: COMPLETION_TOKENS, total_tokens: PROMPT_TOKENS + COMPLETION_TOKENS });
  }
  return `${out}data: [DONE]\n\n`;
}

export async function startPythonLikeUpstream({ apiKeys = [] } = {}) {
  const seen = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const rawTarget = req.url;
      const path = unquote(rawTarget.split('?')[0]);
      const body = Buffer.concat(chunks);
      const record = { method: req.method, rawTarget, path, headers: req.rawHeaders, body, served: false };
      seen.push(record);
      const send = (status, contentType, text) => {
        const compress = acceptsGzip(req.headers['accept-encoding']) || req.headers['x-test-compress'] === 'always';
        const payload = compress ? zlib.gzipSync(Buffer.from(text)) : Buffer.from(text);
        const headers = { 'content-type': contentType, 'content-length': payload.length };
        if (compress) headers['content-encoding'] = 'gzip';
        res.writeHead(status, headers);
        res.end(payload);
      };
      const error = (status, message) => send(status, 'application/json', JSON.stringify({ error: { message } }));
      const chat = path === '/v1/chat/completions';
      if (req.method !== 'POST' || !(chat || path === '/v1/completions')) {
        if (path.startsWith('/v1/chat') || path === '/v1/completions') return error(405, 'method not allowed');
        return error(404, `not found: ${path}`);
      }
      if (apiKeys.length > 0 && !apiKeys.some((k) => req.headers.authorization === `Bearer ${k}`)) {
        return error(401, 'Unauthorized');
      }
      let request;
      try {
        request = pythonJsonLoads(body.toString('utf8'));
      } catch (e) {
        return error(400, `There was an error parsing the body: ${e.message}`);
      }
      if (typeof request !== 'object' || request === null || Array.isArray(request)) {
        return error(422, 'the body must be a JSON object');
      }
      const model = typeof request.model === 'string' ? request.model : 'served-model';
      if (model.startsWith('invented-')) {
        return error(404, `The model \`${model}\` does not exist.`);
      }
      record.served = true;
      if (request.stream === true) {
        const includeUsage = Boolean(request.stream_options && request.stream_options.include_usage);
        return send(200, 'text/event-stream', streamBody(model, chat, includeUsage));
      }
      const pad = Math.min(Number(req.headers['x-test-pad']) || 0, 8 * 1024 * 1024);
      return send(200, 'application/json', completionBody(model, chat, pad));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    requests: () => seen.slice(),
    reset: () => { seen.length = 0; },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); }),
  };
}
