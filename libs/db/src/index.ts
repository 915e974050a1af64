export * from './client';
export * from './messages';
export * from './devices';
export * from './deliveries';
export * from './events';
export { Prisma } from './generated/client';
