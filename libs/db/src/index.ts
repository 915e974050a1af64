export * from './client';
export * from './messages';
export * from './devices';
export * from './deliveries';
export { Prisma } from './generated/client';
