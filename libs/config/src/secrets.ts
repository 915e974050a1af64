// What production asks of every key, password, client secret and signing key the apps read: enough
// characters to carry the entropy of a random string (`openssl rand -base64 32` gives 44), and not
// one character repeated, the placeholder nobody meant to keep.

export const MIN_SECRET_LENGTH = 32;

/** "1st", "2nd", "3rd", "4th": an entry of a list, named by its place rather than its text. */
export const ordinal = (index: number) => `${index + 1}${['st', 'nd', 'rd'][index] ?? 'th'}`;

/** Why a secret is too weak to guard anything in production, or undefined. */
export function secretWeakness(secret: string): string | undefined {
  const characters = [...secret];
  if (characters.length < MIN_SECRET_LENGTH) return `shorter than ${MIN_SECRET_LENGTH} characters`;
  if (characters.every((character) => character === characters[0])) return 'one character repeated';
  return undefined;
}

/** Names the variable, never the value; `development` is passed over: it has a problem of its own. */
export function weakSecretProblems(name: string, secrets: string | readonly string[], { what = 'key', development }: { what?: string; development?: string } = {}): string[] {
  const list = typeof secrets === 'string' ? [secrets].filter(Boolean) : secrets;
  return list.flatMap((secret, index) => {
    const weakness = secret === development ? undefined : secretWeakness(secret);
    if (!weakness) return [];
    return [typeof secrets === 'string' ? `${name} is ${weakness}` : `${name}: the ${ordinal(index)} ${what} is ${weakness}`];
  });
}
