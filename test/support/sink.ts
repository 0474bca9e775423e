import { Writable } from 'node:stream';

/** A stream that keeps what is written to it, as a non-terminal (progress output is written plainly). */
export const sink = () => {
  let text = '';
  const stream = Object.assign(new Writable({ write: (c: Buffer, _e, cb) => ((text += c.toString()), cb()) }), {
    isTTY: false,
  });
  return { stream, text: () => text };
};
