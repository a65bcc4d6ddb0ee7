// The defaults the Node benchmarks run with, set before the test harness reads them: the build's
// proxy and simulator, and the tokenizer files scripts/fetch-tokenizers.sh puts in .cache.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
process.env.TOKENMETER_BIN ||= path.join(root, 'build/proxy/tokenmeter');
process.env.TOKENMETER_SIM ||= path.join(root, 'build/tests/sim/tokenmeter-sim');
process.env.TOKENMETER_TOKENIZER_DIR ||= path.join(root, '.cache/tokenizers');
