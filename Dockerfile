# One image for every app of the stack: the command picks the app (docker-compose.yml,
# deploy/kubernetes), and `node tools/db-migrate.mjs` migrates the database.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json prisma.config.ts ./
COPY prisma ./prisma
RUN npm ci --no-audit --no-fund
COPY . .
RUN node tools/build.mjs && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
# The root filesystem may be read-only (it is on Kubernetes): what the tools write, such as the
# Prisma CLI's state under $HOME, goes to /tmp, the one writable place. The migration runs Prisma's
# WebAssembly schema engine (prisma.config.ts), which ships in node_modules: nothing is downloaded.
ENV NODE_ENV=production \
    HOME=/tmp \
    CHECKPOINT_DISABLE=1
WORKDIR /app
COPY --from=build /app/package.json /app/prisma.config.ts ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/prisma ./prisma
COPY --from=build /app/tools ./tools
COPY --from=build /app/dist ./dist
# The node user of the base image, by number, so that Kubernetes can check runAsNonRoot.
USER 1000:1000
EXPOSE 3000 9464
CMD ["node", "--enable-source-maps", "dist/apps/gateway/main.js"]
