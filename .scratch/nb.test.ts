import { negBinomialTail } from '../src/alerts/detector.js';
for (const k of [14, 16, 18, 20]) console.log(k, negBinomialTail(k, 93, 1 / (1 + 66 / 1000)));
