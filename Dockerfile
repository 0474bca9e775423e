# The production image of the service: one image, two roles (API and worker) chosen by the command.
# Built in two stages: compile and bundle the workflows (npm run build), then a runtime stage with the
# production dependencies only (no tsx, no embedded Postgres, no Temporal test server) running node.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workflows ./workflows
COPY activities ./activities
RUN npm run build

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
# glibc keeps one malloc arena per thread and seldom gives their memory back: two bound the resident size.
ENV MALLOC_ARENA_MAX=2
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
# A small first old-space limit: V8 collects early, then grows the heap by HEAP_GROWING_PERCENT (src/memory.ts).
CMD ["node", "--import", "./dist/src/temporal/workflow-vm.mjs", "--initial-old-space-size=32", "--max-semi-space-size=2", "dist/src/main.js", "--api"]
