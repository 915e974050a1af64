/** What a check of untrusted input answers: the value it read, or why it refused it. */
export type Checked<T> = { ok: true; value: T } | { ok: false; error: string };
