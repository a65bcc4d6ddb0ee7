// Run as a child process by tls_sdks.test.mjs: @anthropic-ai/sdk uses the platform's fetch,
// which trusts extra CAs only through NODE_EXTRA_CA_CERTS at process start. Streams one message
// from argv[2] (a base URL) with the simulator headers in argv[3] (JSON) and prints
// {events, message} as JSON on stdout.
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, headersJson] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
const stream = client.messages.stream(
  { model: 'sdk-claude-tls', max_tokens: 100, messages: [{ role: 'user', content: 'say something' }] },
  { headers: JSON.parse(headersJson) });
const events = [];
for await (const event of stream) events.push(event);
process.stdout.write(JSON.stringify({ events, message: await stream.finalMessage() }));
