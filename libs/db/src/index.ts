export * from './client';
export * from './messages';
export * from './devices';
export { Prisma } from './generated/client';
